import { useState } from 'preact/hooks';
import { fullTime } from '../../../lib/format.js';
import { useAction } from '../../../lib/query.js';
import { redeliver, useDeliveries, type DeliveryAttempt, type Webhook } from './webhooks-data.js';

/** While the page is open, its delivery log is read again this often (attempts happen in workers). */
const LOG_REFRESH_MS = 3_000;

/**
 * A webhook's delivery log: every attempt, newest first, the newest 100 at once and "Older
 * attempts" for each 100 before them, with "Redeliver" on each.
 */
export function DeliveryLog({ webhook }: { webhook: Webhook }) {
  const log = useDeliveries(webhook.id, LOG_REFRESH_MS);
  const [said, setSaid] = useState('');
  const again = useAction(async (a: DeliveryAttempt) => {
    setSaid('');
    await redeliver(webhook.id, a.id);
    setSaid(`${a.event} ${a.event_id} queued for redelivery.`);
  });
  const pages = log.data?.pages ?? [];
  const attempts = [...new Map(pages.flatMap((p) => p.data).map((a) => [a.id, a])).values()];
  // The last page read knows of the attempts made since the first was.
  const total = pages[pages.length - 1]?.total ?? 0;
  return (
    <section class="stack" aria-labelledby="delivery-log-title">
      <h2 id="delivery-log-title">Delivery log</h2>
      <p role="status" class="hint">
        {said}
      </p>
      {again.error && <p role="alert">{again.error.message}</p>}
      {log.isError && !log.data ? (
        <p role="alert">The delivery log could not be loaded: {log.error.message}</p>
      ) : !log.data ? (
        <p class="muted">Loading deliveries…</p>
      ) : attempts.length === 0 ? (
        <p class="muted">No deliveries yet. "Send test event" sends one now.</p>
      ) : (
        <>
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
                {attempts.map((a) => (
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
          <div class="form-actions log-more">
            <span class="muted">{shownText(attempts.length, total)}</span>
            {log.hasNextPage && (
              <button
                type="button"
                class="button"
                disabled={log.isFetchingNextPage}
                onClick={() => void log.fetchNextPage()}
              >
                {log.isFetchingNextPage ? 'Loading older attempts…' : 'Older attempts'}
              </button>
            )}
          </div>
          {log.isError && (
            <p role="alert">
              {log.isFetchNextPageError
                ? 'The older attempts could not be loaded'
                : 'The delivery log could not be read again'}
              : {log.error.message}
            </p>
          )}
        </>
      )}
    </section>
  );
}

/** How much of the log is on screen: "The newest 100 of 150 attempts." */
function shownText(shown: number, total: number): string {
  const n = (x: number) => x.toLocaleString('en');
  if (shown < total) return `The newest ${n(shown)} of ${n(total)} attempts.`;
  return total === 1 ? 'The only attempt so far.' : `All ${n(total)} attempts shown.`;
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
