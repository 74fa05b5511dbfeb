import { useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Template } from '../../api/types.js';
import { queryClient, useQuery } from '../../lib/query.js';
import { Field } from '../../ui/AuthCard.js';
import { Dialog } from '../../ui/Dialog.js';
import { errorText } from '../../api/errors.js';
import { fullTime } from '../../lib/format.js';
import { ConfirmDialog } from '../../ui/ConfirmDialog.js';
import './team/settings-screens.css';
import { missingPlaceholders, placeholderCount, renderPreview } from '../../lib/template-body.js';

type Status = Template['status'];
type Category = Template['category'];
const STATUS_LABEL: Record<Status, string> = {
  pending: 'Pending review',
  approved: 'Approved',
  rejected: 'Rejected',
};

const refresh = () => queryClient.invalidateQueries({ queryKey: keys.templates() });

/**
 * Settings › Templates: every template with its review status (kept current by the stream's
 * `template.updated`) and, for one Meta rejected, Meta's reason (what to fix before submitting
 * it again), filtered by status; create one with a live preview; delete one.
 */
export function TemplatesSettings(_props: { rest: string[] }) {
  const [status, setStatus] = useState<Status | 'all'>('all');
  const list = useQuery<Template[]>({
    queryKey: keys.templateList(status),
    queryFn: async ({ signal }) =>
      (
        await data(
          api.GET('/v1/templates', {
            params: { query: { limit: 100, ...(status === 'all' ? {} : { status }) } },
            signal,
          }),
        )
      ).data,
  });
  const whatsapp = useQuery<boolean>({
    queryKey: [...keys.channels(), 'whatsapp-cloud'],
    queryFn: async ({ signal }) =>
      (await data(api.GET('/v1/channels', { signal }))).data.some(
        (c) => c.channel === 'whatsapp' && c.provider === 'whatsapp_cloud' && c.id !== null,
      ),
  });
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<Template | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const sync = async () => {
    setError(null);
    setNotice(null);
    try {
      const r = await data(api.POST('/v1/templates/sync'));
      setNotice(
        `Synced from Meta: ${r.created} new, ${r.updated} updated, ${r.unchanged} unchanged` +
          (r.skipped.length ? `, ${r.skipped.length} skipped.` : '.'),
      );
      await refresh();
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <div class="screen">
      <div class="screen-head">
        <div>
          <h1 id="page-title">Templates</h1>
          <p class="muted">
            {whatsapp.data
              ? 'WhatsApp is connected to Meta: a new template is submitted to Meta, whose review sets its status.'
              : 'Messages outside the 24-hour window and broadcasts use approved templates. Without a WhatsApp connection, the sandbox reviews them.'}
          </p>
        </div>
        {whatsapp.data && (
          <button type="button" class="button" onClick={() => void sync()}>
            Sync from Meta
          </button>
        )}
        <button type="button" class="button primary" onClick={() => setCreating(true)}>
          New template
        </button>
      </div>
      {notice && (
        <p role="status" class="card notice">
          {notice}
        </p>
      )}
      {error && (
        <p role="alert" class="alert">
          {error}
        </p>
      )}
      <div class="inline-form status-filter">
        <Field label="Show">
          <select
            value={status}
            onChange={(e) => setStatus(e.currentTarget.value as Status | 'all')}
          >
            <option value="all">All templates</option>
            <option value="pending">Pending review</option>
            <option value="approved">Approved</option>
            <option value="rejected">Rejected</option>
          </select>
        </Field>
      </div>
      {list.isPending ? (
        <p class="muted">Loading templates…</p>
      ) : list.isError ? (
        <p role="alert" class="alert">
          {errorText(list.error)}
        </p>
      ) : (list.data ?? []).length === 0 ? (
        <p class="muted">
          {status === 'all' ? 'No template yet.' : `No template is ${STATUS_LABEL[status]}.`}
        </p>
      ) : (
        <div class="table-wrap">
          <table class="table" aria-label="Templates">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Language</th>
                <th scope="col">Category</th>
                <th scope="col">Body</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {(list.data ?? []).map((t) => (
                <tr key={t.id}>
                  <th scope="row" class="mono">
                    {t.name}
                  </th>
                  <td>
                    <span class={`pill ${t.status}`}>{STATUS_LABEL[t.status]}</span>
                    {t.status === 'rejected' && t.rejection_reason && (
                      <span class="rejection-reason">Reason: {t.rejection_reason}</span>
                    )}
                  </td>
                  <td>{t.language}</td>
                  <td>{t.category}</td>
                  <td class="template-body">{t.body}</td>
                  <td>{fullTime(t.created_at)}</td>
                  <td class="actions">
                    <button
                      type="button"
                      class="button small"
                      aria-label={`Delete ${t.name}`}
                      onClick={() => setDeleting(t)}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {creating && <NewTemplateDialog onClose={() => setCreating(false)} />}
      {deleting && (
        <ConfirmDialog
          title={`Delete ${deleting.name}?`}
          action="Delete"
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api.DELETE('/v1/templates/{id}', { params: { path: { id: deleting.id } } });
            await refresh();
          }}
        >
          <p>
            Messages already sent keep their text; the name is free again.
            {whatsapp.data ? ' It is deleted at Meta too.' : ''}
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}

function NewTemplateDialog(props: { onClose: () => void }) {
  const [name, setName] = useState('');
  const [language, setLanguage] = useState('en');
  const [category, setCategory] = useState<Category>('utility');
  const [body, setBody] = useState('');
  const [samples, setSamples] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  const count = placeholderCount(body);
  const missing = missingPlaceholders(body);

  const submit = async (event: Event) => {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      await data(api.POST('/v1/templates', { body: { name, language, category, body } }));
      await refresh();
      props.onClose();
    } catch (err) {
      setError(errorText(err));
      setPending(false);
    }
  };

  return (
    <Dialog title="New template" onClose={props.onClose} wide>
      <form class="stack" onSubmit={(e) => void submit(e)}>
        <Field label="Name" hint="Lowercase letters, digits and _ (order_shipped).">
          <input
            required
            pattern="[a-z0-9_]{1,512}"
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </Field>
        <div class="inline-form">
          <Field label="Language" hint="en, pt_BR…">
            <input
              required
              pattern="[a-z]{2,3}(_[A-Z]{2})?"
              value={language}
              onInput={(e) => setLanguage(e.currentTarget.value)}
            />
          </Field>
          <Field label="Category">
            <select
              value={category}
              onChange={(e) => setCategory(e.currentTarget.value as Category)}
            >
              <option value="utility">Utility</option>
              <option value="marketing">Marketing</option>
              <option value="authentication">Authentication</option>
            </select>
          </Field>
        </div>
        <Field
          label="Body"
          hint="Parameters are numbered from 1: Hi {{1}}, your order {{2}} shipped."
        >
          <textarea
            required
            rows={4}
            maxLength={1024}
            value={body}
            onInput={(e) => setBody(e.currentTarget.value)}
          />
        </Field>
        {missing.length > 0 && (
          <p class="hint error-text">
            Missing {missing.map((n) => `{{${n}}}`).join(', ')}: parameters are numbered without
            gaps.
          </p>
        )}
        {count > 0 && (
          <fieldset class="members">
            <legend>Sample values for the preview</legend>
            {Array.from({ length: count }, (_, i) => (
              <Field key={i} label={`Sample for {{${i + 1}}}`}>
                <input
                  value={samples[i] ?? ''}
                  onInput={(e) => {
                    const next = [...samples];
                    next[i] = e.currentTarget.value;
                    setSamples(next);
                  }}
                />
              </Field>
            ))}
          </fieldset>
        )}
        <section aria-label="Preview">
          <p class="label">Preview</p>
          <p class="preview">{body ? renderPreview(body, samples) : ' '}</p>
        </section>
        {error && (
          <p role="alert" class="alert">
            {error}
          </p>
        )}
        <div class="dialog-actions">
          <button type="button" class="button ghost" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="button primary" disabled={pending}>
            Create template
          </button>
        </div>
      </form>
    </Dialog>
  );
}
