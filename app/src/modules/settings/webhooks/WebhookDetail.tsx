import { useState } from 'preact/hooks';
import { fieldErrors } from '../../../api/errors.js';
import { keys } from '../../../api/keys.js';
import { fullTime } from '../../../lib/format.js';
import { useAction, useQuery } from '../../../lib/query.js';
import { navigate, onLinkClick } from '../../../lib/router.js';
import { ConfirmDialog } from '../../../ui/ConfirmDialog.js';
import { DeliveryLog } from './DeliveryLog.js';
import { EventsFieldset, eventsError } from './EventsFieldset.js';
import {
  deleteWebhook,
  getWebhook,
  sendTestEvent,
  updateWebhook,
  type Webhook,
  type WebhookEvent,
} from './webhooks-data.js';

/**
 * One webhook: its state, "Edit events", "Send test event", enable/disable, delete, and its
 * delivery log.
 */
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
  const [editing, setEditing] = useState(false);
  const toggle = useAction(async () => {
    const next = webhook.status === 'active' ? 'disabled' : 'active';
    await updateWebhook(webhook.id, { status: next });
    setSaid(
      next === 'active'
        ? 'Webhook enabled: new events are sent to it.'
        : 'Webhook disabled: nothing more is sent to it, queued retries included.',
    );
  });
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
      {editing && (
        <EventsForm
          webhook={webhook}
          onDone={() => {
            setEditing(false);
            setSaid('Events saved.');
          }}
          onCancel={() => setEditing(false)}
        />
      )}
      <div class="form-actions">
        {!editing && (
          <button type="button" class="button" onClick={() => setEditing(true)}>
            Edit events
          </button>
        )}
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

/** "Edit events": the same checklist as a new webhook's, saved with PATCH /v1/webhooks/{id}. */
function EventsForm(props: { webhook: Webhook; onDone: () => void; onCancel: () => void }) {
  const [events, setEvents] = useState<Set<WebhookEvent>>(() => new Set(props.webhook.events));
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [saving, setSaving] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setErrors({});
    try {
      await updateWebhook(props.webhook.id, { events: [...events] });
      props.onDone();
    } catch (err) {
      setErrors(fieldErrors(err));
    } finally {
      setSaving(false);
    }
  };
  return (
    <form class="panel stack" aria-label="Webhook events" onSubmit={(e) => void submit(e)}>
      <h2>Events</h2>
      <EventsFieldset
        events={events}
        onChange={setEvents}
        error={eventsError(errors)}
        errorId="webhook-edit-events-error"
      />
      {errors[''] && <p role="alert">{errors['']}</p>}
      <p class="hint">Events already queued for this webhook are still sent.</p>
      <div class="form-actions">
        <button type="submit" class="button primary" disabled={saving || events.size === 0}>
          Save events
        </button>
        <button type="button" class="button ghost" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
