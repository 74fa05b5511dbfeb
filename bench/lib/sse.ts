/**
 * Many Server-Sent Events streams from one process: one socket each (no agent pooling), from a
 * chosen local address, parsed just enough to hand on each event's name and data.
 */
import http from 'node:http';
import { assertLocal } from './http.js';

export interface SseEvent {
  event: string;
  data: string;
}

export interface SseStream {
  /** Resolves with the first event (the stream is open and answering), rejects on failure. */
  opened: Promise<void>;
  /** Whether the stream ended or failed after it opened (the bench counts these). */
  readonly ended: boolean;
  close(): void;
}

/**
 * Opens `url` (127.0.0.1 only) as an event stream from `localAddress` (any 127.0.0.0/8
 * address: the service counts its visitor rate limit per address). `onEvent` gets every event
 * with the time it was parsed (performance.now()).
 */
export function openSse(
  url: string,
  opts: {
    localAddress: string;
    headers?: Record<string, string>;
    timeoutMs: number;
    onEvent: (event: SseEvent, at: number) => void;
  },
): SseStream {
  assertLocal(url);
  const target = new URL(url);
  let ended = false;
  let closing = false;
  let req: http.ClientRequest | undefined;
  const opened = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`no event within ${opts.timeoutMs} ms`));
      req?.destroy();
    }, opts.timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: 'GET',
        headers: { accept: 'text/event-stream', ...opts.headers },
        localAddress: opts.localAddress,
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            fail(
              new Error(
                `status ${res.statusCode ?? 0}: ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`,
              ),
            ),
          );
          return;
        }
        res.setEncoding('utf8');
        let buffer = '';
        let first = true;
        res.on('data', (chunk: string) => {
          const at = performance.now();
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let event = 'message';
            const data: string[] = [];
            for (const line of block.split('\n')) {
              if (line.startsWith('event:')) event = line.slice(6).trim();
              else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
            }
            if (data.length === 0) continue; // a comment (keep-alive) or `retry:` alone
            if (first) {
              first = false;
              clearTimeout(timer);
              resolve();
            }
            opts.onEvent({ event, data: data.join('\n') }, at);
          }
        });
        res.on('close', () => {
          if (!closing) ended = true;
          fail(new Error('the stream ended before its first event'));
        });
      },
    );
    req.on('error', (err) => {
      if (!closing) ended = true;
      fail(err);
    });
    req.end();
  });
  // The caller awaits `opened`; a failure after a successful open is only counted (`ended`).
  opened.catch(() => undefined);
  return {
    opened,
    get ended() {
      return ended;
    },
    close() {
      closing = true;
      req?.destroy();
    },
  };
}
