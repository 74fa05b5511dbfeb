import { useState } from 'preact/hooks';
import { keys } from '../../../api/keys.js';
import { fullTime } from '../../../lib/format.js';
import { useAction, useQuery } from '../../../lib/query.js';
import { navigate, onLinkClick } from '../../../lib/router.js';
import { ConfirmDialog } from '../../../ui/ConfirmDialog.js';
import {
  deleteWebhook,
  getWebhook,
  listDeliveries,
  redeliver,
  sendTestEvent,
  setStatus,
  type DeliveryAttempt,
  type Webhook,
} from './webhooks-data.js';

/** While the page is open, its delivery log is read again this often (attempts happen in workers). */
const LOG_REFRESH_MS = 3_000;

/** One webhook: its state, "Send test event", enable/disable, delete, and its delivery log. */
export function WebhookDetail({ id }: { id: string }) {
  const hook = useQuery({
    queryKey: keys.webhook(id),
    queryFn: ({ signal }) => getWebhook(id, signal),
  });
  return (
    <section class="webhooks stack" aria-labelledby="page-title">
      <p>
        <a href="/app/settings/webhooks" onClick={onLinkClick('/settings/webhooks')}>
          ← All webhooks
        </a>
      </p>
      {hook.isError ? (
        <>
          <h1 id="page-title">Webhook</h1>
          <p role="alert">The webhook could not be loaded: {hook.error.message}</p>
        </>
      ) : !hook.data ? (
        <>
          <h1 id="page-title">Webhook</h1>
          <p class="muted">Loading webhook…</p>
        </>
      ) : (
        <>
          <WebhookHead webhook={hook.data} />
          <DeliveryLog webhook={hook.data} />
        </>
      )}
    </section>
  );
}

function WebhookHead({ webhook }: { webhook: Webhook }) {
  const [confirming, setConfirming] = useState(false);
  const [said, setSaid] = useState('');
  const test = useAction(async () => {
    const { event_id } = await sendTestEvent(webhook.id);
    setSaid(`Test event ${event_id} queued.`);
  });
  const toggle = useAction(() =>
    setStatus(webhook.id, webhook.status === 'active' ? 'disabled' : 'active'),
  );
  const remove = async () => {
    await deleteWebhook(webhook.id);
    navigate('/settings/webhooks');
  };
  const error = test.error ?? toggle.error;
  return (
    <div class="stack">
      <h1 id="page-title" class="webhook-url">
        {webhook.url}
      </h1>
      <dl class="facts">
        <div>
          <dt>Status</dt>
          <dd>
            <span class={`state ${webhook.status}`}>
              {webhook.status === 'active' ? 'Active' : 'Disabled'}
            </span>
          </dd>
        </div>
        <div>
          <dt>Events</dt>
          <dd>{webhook.events.join(', ')}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{fullTime(webhook.created_at)}</dd>
        </div>
      </dl>
      <div class="form-actions">
        <button
          type="button"
          class="button primary"
          disabled={test.pending || webhook.status !== 'active'}
          onClick={() => void test.run()}
        >
          Send test event
        </button>
        <button
          type="button"
          class="button ghost"
          disabled={toggle.pending}
          onClick={() => void toggle.run()}
        >
          {webhook.status === 'active' ? 'Disable' : 'Enable'}
        </button>
        <button type="button" class="button ghost danger" onClick={() => setConfirming(true)}>
          Delete
        </button>
      </div>
      <p role="status" class="hint">
        {said}
      </p>
      {error && <p role="alert">{error.message}</p>}
      {confirming && (
        <ConfirmDialog
          title="Delete this webhook?"
          action="Delete webhook"
          onConfirm={remove}
          onClose={() => setConfirming(false)}
        >
          <p>
            Deliveries to {webhook.url} stop at once, queued retries included. This cannot be
            undone.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}

function DeliveryLog({ webhook }: { webhook: Webhook }) {
  const log = useQuery({
    queryKey: keys.deliveries(webhook.id),
    queryFn: ({ signal }) => listDeliveries(webhook.id, signal),
    refetchInterval: LOG_REFRESH_MS,
  });
  const [said, setSaid] = useState('');
  const again = useAction(async (a: DeliveryAttempt) => {
    setSaid('');
    await redeliver(webhook.id, a.id);
    setSaid(`${a.event} ${a.event_id} queued for redelivery.`);
  });
  return (
    <section class="stack" aria-labelledby="delivery-log-title">
      <h2 id="delivery-log-title">Delivery log</h2>
      <p role="status" class="hint">
        {said}
      </p>
      {again.error && <p role="alert">{again.error.message}</p>}
      {log.isError ? (
        <p role="alert">The delivery log could not be loaded: {log.error.message}</p>
      ) : !log.data ? (
        <p class="muted">Loading deliveries…</p>
      ) : log.data.data.length === 0 ? (
        <p class="muted">No deliveries yet. "Send test event" sends one now.</p>
      ) : (
        <div class="table-scroll">
          <table class="settings-table deliveries" aria-labelledby="delivery-log-title">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Event</th>
                <th scope="col">Attempt</th>
                <th scope="col">Status</th>
                <th scope="col">Duration</th>
                <th scope="col">Response</th>
                <th scope="col">Next retry</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {log.data.data.map((a) => (
                <AttemptRow
                  key={a.id}
                  attempt={a}
                  disabled={again.pending || webhook.status !== 'active'}
                  onRedeliver={() => void again.run(a)}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function AttemptRow(props: {
  attempt: DeliveryAttempt;
  disabled: boolean;
  onRedeliver: () => void;
}) {
  const a = props.attempt;
  const ok = a.status_code !== null && a.status_code >= 200 && a.status_code < 300;
  return (
    <tr>
      <td>{fullTime(a.created_at)}</td>
      <td>
        <code>{a.event}</code>
        <div class="hint mono">{a.event_id}</div>
      </td>
      <td>{a.attempt}</td>
      <td>
        <span class={`state ${ok ? 'active' : 'failed'}`}>{a.status_code ?? 'No answer'}</span>
        {a.error && <div class="hint">{a.error}</div>}
      </td>
      <td>{a.duration_ms} ms</td>
      <td>
        {a.response_excerpt ? (
          <pre class="excerpt">{a.response_excerpt}</pre>
        ) : (
          <span class="muted">—</span>
        )}
      </td>
      <td>{a.next_attempt_at ? fullTime(a.next_attempt_at) : <span class="muted">—</span>}</td>
      <td>
        <button
          type="button"
          class="button ghost small"
          disabled={props.disabled}
          aria-label={`Redeliver ${a.event} (attempt ${a.attempt})`}
          onClick={props.onRedeliver}
        >
          Redeliver
        </button>
      </td>
    </tr>
  );
}
