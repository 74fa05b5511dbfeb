import './webhooks/webhooks.css';
import { useState } from 'preact/hooks';
import { keys } from '../../api/keys.js';
import { useQuery } from '../../lib/query.js';
import { onLinkClick } from '../../lib/router.js';
import { Dialog } from '../../ui/Dialog.js';
import { CopyButton } from '../../ui/Copy.js';
import { EventsFieldset, eventsError } from './webhooks/EventsFieldset.js';
import { WebhookDetail } from './webhooks/WebhookDetail.js';
import {
  createWebhook,
  listWebhooks,
  type WebhookEvent,
  type WebhookWithSecret,
} from './webhooks/webhooks-data.js';
import { fieldErrors } from '../../api/errors.js';

/** Settings › Webhooks: the list (`/settings/webhooks`) or one webhook (`…/webhooks/{id}`). */
export function WebhooksSettings({ rest }: { rest: string[] }) {
  if (rest[0]) return <WebhookDetail key={rest[0]} id={rest[0]} />;
  return <WebhookList />;
}

function WebhookList() {
  const hooks = useQuery({
    queryKey: keys.webhooks(),
    queryFn: ({ signal }) => listWebhooks(signal),
  });
  const [adding, setAdding] = useState(false);
  const [created, setCreated] = useState<WebhookWithSecret | null>(null);
  return (
    <section class="webhooks stack" aria-labelledby="page-title">
      <div class="section-head">
        <h1 id="page-title">Webhooks</h1>
        {!adding && (
          <button type="button" class="button primary" onClick={() => setAdding(true)}>
            Add webhook
          </button>
        )}
      </div>
      <p class="muted">
        Each webhook receives the events it subscribes to as signed POSTs to its https:// URL.
      </p>
      {adding && (
        <WebhookForm
          onCancel={() => setAdding(false)}
          onCreated={(w) => {
            setAdding(false);
            setCreated(w);
          }}
        />
      )}
      {hooks.isError ? (
        <p role="alert">The webhooks could not be loaded: {hooks.error.message}</p>
      ) : !hooks.data ? (
        <p class="muted">Loading webhooks…</p>
      ) : hooks.data.data.length === 0 ? (
        <p class="muted">No webhooks yet.</p>
      ) : (
        <table class="settings-table">
          <caption class="visually-hidden">Webhooks</caption>
          <thead>
            <tr>
              <th scope="col">URL</th>
              <th scope="col">Events</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {hooks.data.data.map((w) => (
              <tr key={w.id}>
                <td>
                  <a
                    href={`/app/settings/webhooks/${w.id}`}
                    onClick={onLinkClick(`/settings/webhooks/${w.id}`)}
                  >
                    {w.url}
                  </a>
                </td>
                <td>{w.events.join(', ')}</td>
                <td>
                  <span class={`state ${w.status}`}>
                    {w.status === 'active' ? 'Active' : 'Disabled'}
                  </span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {created && <SecretDialog webhook={created} onClose={() => setCreated(null)} />}
    </section>
  );
}

function WebhookForm(props: { onCancel: () => void; onCreated: (w: WebhookWithSecret) => void }) {
  const [url, setUrl] = useState('https://');
  const [events, setEvents] = useState<Set<WebhookEvent>>(new Set(['message.received']));
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [saving, setSaving] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setErrors({});
    try {
      props.onCreated(await createWebhook(url.trim(), [...events]));
    } catch (err) {
      setErrors(fieldErrors(err));
    } finally {
      setSaving(false);
    }
  };
  return (
    <form class="panel stack" onSubmit={(e) => void submit(e)} aria-label="New webhook">
      <h2>New webhook</h2>
      <label class="field">
        <span>URL</span>
        <input
          type="url"
          value={url}
          required
          aria-invalid={errors.url ? true : undefined}
          aria-describedby={errors.url ? 'webhook-url-error' : undefined}
          onInput={(e) => setUrl(e.currentTarget.value)}
        />
        {errors.url && (
          <span id="webhook-url-error" class="error-text">
            {errors.url}
          </span>
        )}
      </label>
      <EventsFieldset
        events={events}
        onChange={setEvents}
        error={eventsError(errors)}
        errorId="webhook-events-error"
      />
      {errors[''] && <p role="alert">{errors['']}</p>}
      <div class="form-actions">
        <button type="submit" class="button primary" disabled={saving || events.size === 0}>
          Create webhook
        </button>
        <button type="button" class="button ghost" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function SecretDialog(props: { webhook: WebhookWithSecret; onClose: () => void }) {
  return (
    <Dialog title="Webhook signing secret" onClose={props.onClose}>
      <div class="stack">
        <p>
          Verify each delivery's signature with this secret. It is shown only now: copy it into your
          receiver's configuration.
        </p>
        <label class="field">
          <span>Signing secret</span>
          <input type="text" readOnly value={props.webhook.secret} class="mono" />
        </label>
        <CopyButton text={props.webhook.secret} label="Copy secret" />
        <div class="dialog-actions">
          <button type="button" class="button primary" onClick={props.onClose}>
            Done
          </button>
        </div>
      </div>
    </Dialog>
  );
}
