import { WEBHOOK_EVENTS, type WebhookEvent } from './webhooks-data.js';

/**
 * "Events to send": a checkbox per event a webhook may subscribe to, named by the event as the
 * API and the receiver's payloads name it. Shared by the new-webhook form and "Edit events".
 */
export function EventsFieldset(props: {
  events: ReadonlySet<WebhookEvent>;
  onChange: (events: Set<WebhookEvent>) => void;
  error?: string;
  errorId: string;
}) {
  const toggle = (ev: WebhookEvent, on: boolean) => {
    const next = new Set(props.events);
    if (on) next.add(ev);
    else next.delete(ev);
    props.onChange(next);
  };
  return (
    <fieldset class="events" aria-describedby={props.error ? props.errorId : undefined}>
      <legend>Events to send</legend>
      {WEBHOOK_EVENTS.map((ev) => (
        <label key={ev} class="check">
          <input
            type="checkbox"
            checked={props.events.has(ev)}
            onChange={(e) => toggle(ev, e.currentTarget.checked)}
          />{' '}
          {ev}
        </label>
      ))}
      {props.error && (
        <p id={props.errorId} class="error-text">
          {props.error}
        </p>
      )}
    </fieldset>
  );
}

/** The first of a refusal's field errors that concerns `events` (`events`, `events.3`…). */
export function eventsError(errors: Record<string, string>): string | undefined {
  return Object.entries(errors).find(([f]) => f.startsWith('events'))?.[1];
}
