import './broadcasts.css';
import { useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Contact, Template } from '../../api/types.js';
import { useQuery } from '../../lib/query.js';
import { onLinkClick } from '../../lib/router.js';
import { currentSession } from '../session/session.js';
import {
  audienceLabel,
  cancelBroadcast,
  fetchBroadcast,
  fetchRecipients,
  PAGE_SIZE,
  RECIPIENT_STATUSES,
  statusLabel,
  type Broadcast,
  type Paged,
  type Recipient,
  type RecipientStatus,
} from './broadcasts-data.js';
import { fullTime } from '../../lib/format.js';
import { renderPreview } from '../../lib/template-body.js';
import { ConfirmDialog } from '../../ui/ConfirmDialog.js';
import { Pager } from '../../ui/Pager.js';

const STATS: { key: keyof Broadcast['stats']; label: string }[] = [
  { key: 'sent', label: 'Sent' },
  { key: 'delivered', label: 'Delivered' },
  { key: 'read', label: 'Read' },
  { key: 'replied', label: 'Replied' },
  { key: 'failed', label: 'Failed' },
];

/**
 * One broadcast (`/broadcasts/{id}`): its stats, live while it sends (broadcast.updated on the
 * event stream patches the cache), cancel while scheduled, and its recipients.
 */
export function BroadcastDetail({ id }: { id: string }) {
  const isAdmin = currentSession().user.role === 'admin';
  const broadcast = useQuery<Broadcast>({
    queryKey: keys.broadcast(id),
    queryFn: ({ signal }) => fetchBroadcast(id, signal),
  });
  const [confirming, setConfirming] = useState(false);
  const back = (
    <a class="bc-back" href="/app/broadcasts" onClick={onLinkClick('/broadcasts')}>
      ← All broadcasts
    </a>
  );
  if (broadcast.isPending)
    return (
      <div class="bc-page">
        {back}
        <p class="muted">Loading the broadcast…</p>
      </div>
    );
  if (broadcast.error)
    return (
      <div class="bc-page">
        {back}
        <h1 id="page-title">Broadcast</h1>
        <p role="alert" class="alert">
          {broadcast.error.message}
        </p>
      </div>
    );
  const b = broadcast.data;
  return (
    <div class="bc-page">
      {back}
      <header class="bc-head">
        <h1 id="page-title">{b.name}</h1>
        <span class={`bc-status ${b.status}`}>{statusLabel(b.status)}</span>
        {b.status === 'sending' && <span class="muted small">Live</span>}
        <span class="spacer" />
        {isAdmin && b.status === 'scheduled' && (
          <button type="button" class="button" onClick={() => setConfirming(true)}>
            Cancel broadcast
          </button>
        )}
      </header>
      <dl class="bc-facts">
        <div>
          <dt>Channel</dt>
          <dd>{b.channel}</dd>
        </div>
        <div>
          <dt>Audience</dt>
          <dd>{audienceLabel(b.audience)}</dd>
        </div>
        <div>
          <dt>Message</dt>
          <dd>
            {b.message.type === 'text' ? (
              b.message.content
            ) : (
              <TemplateMessage
                name={b.message.template_name ?? ''}
                params={b.message.template_params ?? []}
              />
            )}
          </dd>
        </div>
        <div>
          <dt>{b.scheduled_at ? 'Scheduled for' : 'Created'}</dt>
          <dd>{fullTime(b.scheduled_at ?? b.created_at)}</dd>
        </div>
      </dl>
      {b.status === 'failed' && b.failure_reason && (
        <p class="alert">Stopped: {b.failure_reason}</p>
      )}
      {b.status === 'draft' && <p class="muted">Cancelled: this broadcast will not be sent.</p>}
      <section aria-label="Stats">
        <h2 class="visually-hidden">Stats</h2>
        <ul class="bc-stats">
          {STATS.map((s) => (
            <li key={s.key} aria-label={`${s.label}: ${b.stats[s.key]}`}>
              <span class="bc-stat-value">{b.stats[s.key]}</span>
              <span class="bc-stat-label">{s.label}</span>
            </li>
          ))}
        </ul>
      </section>
      {b.status !== 'scheduled' && b.status !== 'draft' && <Recipients id={id} />}
      {confirming && (
        <ConfirmDialog
          title="Cancel this broadcast?"
          action="Cancel broadcast"
          keep="Keep it"
          destructive={false}
          onConfirm={() => cancelBroadcast(id)}
          onClose={() => setConfirming(false)}
        >
          <p>
            “{b.name}” will not be sent at {fullTime(b.scheduled_at ?? b.created_at)}. It stays in
            the list as a draft.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}

/**
 * A template message: the template's name, and its text with the broadcast's parameters as the
 * recipients read it. The template is looked up by name among the account's (the list Settings ›
 * Templates reads, from the same cache); one deleted since, or past the first 100, shows its
 * parameters instead.
 */
function TemplateMessage({ name, params }: { name: string; params: string[] }) {
  const templates = useQuery<Template[]>({
    queryKey: keys.templateList('all'),
    queryFn: async ({ signal }) =>
      (await data(api.GET('/v1/templates', { params: { query: { limit: 100 } }, signal }))).data,
  });
  const template = templates.data?.find((t) => t.name === name);
  return (
    <>
      <span class="bc-template">
        Template <span class="bc-template-name">{name}</span>
      </span>
      {template ? (
        <span class="bc-message-text">{renderPreview(template.body, params)}</span>
      ) : (
        params.length > 0 && <span class="bc-message-text">Parameters: {params.join(', ')}</span>
      )}
    </>
  );
}

/** The recipients, each with its status and failure reason, filterable by status, paged. */
function Recipients({ id }: { id: string }) {
  const [status, setStatus] = useState<RecipientStatus | ''>('');
  const [page, setPage] = useState(1);
  const recipients = useQuery<Paged<Recipient>>({
    queryKey: keys.recipients(id, status, page),
    queryFn: ({ signal }) => fetchRecipients(id, status, page, signal),
  });
  return (
    <section class="bc-recipients" aria-labelledby="recipients-title">
      <header class="bc-head">
        <h2 id="recipients-title">Recipients</h2>
        {recipients.data && (
          <span class="muted" aria-live="polite">
            {recipients.data.total} {status ? statusLabel(status).toLowerCase() : 'in all'}
          </span>
        )}
        <span class="spacer" />
        <label class="bc-inline-field">
          <span>Status</span>
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.currentTarget.value as RecipientStatus | '');
              setPage(1);
            }}
          >
            <option value="">All</option>
            {RECIPIENT_STATUSES.map((s) => (
              <option key={s} value={s}>
                {statusLabel(s)}
              </option>
            ))}
          </select>
        </label>
      </header>
      {recipients.isPending ? (
        <p class="muted">Loading recipients…</p>
      ) : recipients.error ? (
        <p role="alert" class="alert">
          {recipients.error.message}
        </p>
      ) : recipients.data.data.length === 0 ? (
        <p class="muted">{status ? 'No recipient has this status.' : 'No recipient yet.'}</p>
      ) : (
        <>
          <div class="bc-table-wrap">
            <table class="bc-table" aria-label="Recipients">
              <thead>
                <tr>
                  <th scope="col">Contact</th>
                  <th scope="col">Phone</th>
                  <th scope="col">Status</th>
                  <th scope="col">Failure reason</th>
                  <th scope="col">Replied</th>
                </tr>
              </thead>
              <tbody>
                {recipients.data.data.map((r) => (
                  <RecipientRow key={r.contact_id} recipient={r} />
                ))}
              </tbody>
            </table>
          </div>
          <Pager
            label="Recipient pages"
            page={page}
            total={recipients.data.total}
            pageSize={PAGE_SIZE}
            onPage={setPage}
          />
        </>
      )}
    </section>
  );
}

function RecipientRow({ recipient: r }: { recipient: Recipient }) {
  // The contact from the cache the rest of the app shares (a deleted one shows its id).
  const contact = useQuery<Contact>({
    queryKey: keys.contact(r.contact_id),
    queryFn: ({ signal }) =>
      data(api.GET('/v1/contacts/{id}', { params: { path: { id: r.contact_id } }, signal })),
    retry: false,
  });
  const c = contact.data;
  return (
    <tr>
      <td>
        <a
          href={`/app/contacts/${r.contact_id}`}
          onClick={onLinkClick(`/contacts/${r.contact_id}`)}
        >
          {c?.name ?? c?.phone ?? r.contact_id}
        </a>
      </td>
      <td>{c?.phone ?? ''}</td>
      <td>
        <span class={`bc-status ${r.status}`}>{statusLabel(r.status)}</span>
      </td>
      <td>{r.failure_reason ?? ''}</td>
      <td>{r.replied ? 'Yes' : 'No'}</td>
    </tr>
  );
}
