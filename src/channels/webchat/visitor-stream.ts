import type { ServerResponse } from 'node:http';
import type { VisitorContext, WebchatService } from './webchat.service.js';

/** Messages are read again from this long before the newest one sent (commits can land late). */
const OVERLAP_MS = 10_000;
const KEEPALIVE_MS = 20_000;
/** While wake-ups from other processes do not arrive, a stream reads this often. */
const POLL_MS = 1_000;

/**
 * One open widget stream (Server-Sent Events): every message of the visitor's conversation
 * created from `since` on, as `event: message` with the message's creation time as its `id`,
 * so that EventSource's automatic reconnection (Last-Event-ID) resumes where it stopped. The
 * window read on each wake-up overlaps the last one; the widget keeps messages by id, so a
 * message sent twice shows once.
 */
export function openVisitorStream(
  res: ServerResponse,
  webchat: WebchatService,
  start: VisitorContext,
  since: Date,
): void {
  let ctx = start;
  let cursor = since.getTime();
  const sent = new Set<string>();
  let closed = false;
  let running = false;
  let again = false;
  let unsubscribe: () => void = () => undefined;
  let key: string | null = null;

  const write = (text: string) => {
    if (!closed) res.write(text);
  };
  const subscribe = () => {
    // Before its first message an anonymous visitor has no contact: it listens under its own id
    // until it has one.
    const next = ctx.visitor.contact_id ?? ctx.visitor.id;
    if (next === key) return;
    unsubscribe();
    key = next;
    unsubscribe = webchat.wakeups.subscribe(ctx.widget.accountId, next, wake);
  };
  const flush = async () => {
    ctx = await webchat.refresh(ctx);
    subscribe();
    const messages = await webchat.messages(ctx, new Date(cursor - OVERLAP_MS));
    for (const m of messages) {
      if (sent.has(m.id)) continue;
      sent.add(m.id);
      cursor = Math.max(cursor, Date.parse(m.created_at));
      write(`id: ${m.created_at}\nevent: message\ndata: ${JSON.stringify(m)}\n\n`);
    }
    if (sent.size > 1000) for (const id of [...sent].slice(0, 500)) sent.delete(id);
  };
  function wake(): void {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    void (async () => {
      do {
        again = false;
        try {
          await flush();
        } catch {
          // The next wake-up or poll tries again; the widget reconnects if the stream ends.
        }
      } while (again && !closed);
      running = false;
    })();
  }

  subscribe();
  // `retry`: EventSource reconnects after 1 s rather than its default 3 s.
  write(`retry: 1000\nevent: ready\ndata: {}\n\n`);
  wake();
  const keepalive = setInterval(() => write(': keep-alive\n\n'), KEEPALIVE_MS);
  const poll = setInterval(() => {
    if (!webchat.wakeups.live) wake();
  }, POLL_MS);
  res.on('close', () => {
    closed = true;
    clearInterval(keepalive);
    clearInterval(poll);
    unsubscribe();
  });
}
