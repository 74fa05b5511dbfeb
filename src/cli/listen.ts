import { type Command, InvalidArgumentError } from 'commander';
import { EVENT_TYPES } from '../events/event-types.js';
import { DELIVERY_TIMEOUT_MS } from '../webhooks/delivery-attempt.js';
import { deliveryHeaders } from '../webhooks/signing.js';
import { listenSecret } from './listen-secret.js';
import { SseReader, type SseEvent } from './sse-reader.js';

const DEFAULT_API_URL = 'http://127.0.0.1:3000';
/** Three missed keep-alives (the service sends one every 15 s): the connection is dead. */
const SILENCE_MS = 45_000;
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

/** The service's address, without a trailing `/` or `/v1` (both are accepted). */
function serviceUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('must be a URL such as http://127.0.0.1:3000');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new InvalidArgumentError('must be an http:// or https:// URL');
  return url.href.replace(/\/+$/, '').replace(/\/v1$/, '');
}

function receiverUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('must be a URL such as http://127.0.0.1:4000/webhooks');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new InvalidArgumentError('must be an http:// or https:// URL');
  return url.href;
}

function eventTypes(value: string): string[] {
  const types = value
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  if (types.length === 0) throw new InvalidArgumentError('name at least one event type');
  const known: readonly string[] = EVENT_TYPES;
  for (const t of types)
    if (!known.includes(t))
      throw new InvalidArgumentError(`unknown event type "${t}"; known: ${EVENT_TYPES.join(', ')}`);
  return [...new Set(types)];
}

/** A failure that ends `listen`: printed as one line, exit code 1. */
class ListenFailure extends Error {}

/** A failure that a reconnection may cure: the connection dropped, or the service is busy. */
class Dropped extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** What a failed fetch says: its cause (`connect ECONNREFUSED 127.0.0.1:4000`) when it has one. */
function reason(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof Error && cause.message) return cause.message;
    if (err.name === 'TimeoutError') return 'no answer within 10 s';
    return err.message;
  }
  return String(err);
}

async function errorMessage(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { message?: string } };
    if (body.error?.message) return `${res.status} ${body.error.message}`;
  } catch {
    // not the error envelope
  }
  return `${res.status} ${res.statusText}`;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });

interface ListenOptions {
  api: string;
  key: string;
  forwardTo: string;
  types: readonly string[];
  secret: string;
  out: (line: string) => void;
  err: (line: string) => void;
  stop: AbortSignal;
}

/**
 * Follows the account's live event stream and POSTs each event to the receiver, signed with the
 * headers of a real webhook delivery, one at a time and in order. The stream is read only as
 * fast as the receiver answers; after a drop it resumes with `Last-Event-ID` from the last
 * event it forwarded, so none is lost or sent twice. A receiver's answer (or failure) is
 * printed and never retried.
 */
class Listener {
  private lastEventId: string | undefined;
  private opened = false;
  /** Whether `Ready` was printed. */
  private announced = false;

  constructor(private readonly o: ListenOptions) {}

  async run(): Promise<void> {
    let delay = FIRST_RETRY_MS;
    while (!this.o.stop.aborted) {
      const before = this.lastEventId;
      try {
        await this.follow();
        if (this.o.stop.aborted) return;
        throw new Dropped('the service ended the stream');
      } catch (err) {
        if (this.o.stop.aborted) return;
        if (err instanceof ListenFailure) throw err;
        const message = err instanceof Dropped ? err.message : reason(err);
        // Before the stream has ever opened, an unreachable service is a mistake to report.
        if (!this.opened) throw new ListenFailure(`cannot reach ${this.o.api}: ${message}`);
        if (this.lastEventId !== before) delay = FIRST_RETRY_MS;
        const wait = Math.max(delay, err instanceof Dropped ? (err.retryAfterMs ?? 0) : 0);
        this.o.err(`stream dropped (${message}); reconnecting in ${(wait / 1000).toFixed(1)} s`);
        await sleep(wait, this.o.stop);
        delay = Math.min(delay * 2, MAX_RETRY_MS);
      }
    }
  }

  /** One connection to the stream, until it ends or drops. */
  private async follow(): Promise<void> {
    const connection = new AbortController();
    const abort = () => connection.abort();
    this.o.stop.addEventListener('abort', abort);
    let silence: NodeJS.Timeout | undefined;
    const watch = () => {
      clearTimeout(silence);
      silence = setTimeout(() => connection.abort(new Dropped('no keep-alive')), SILENCE_MS);
    };
    try {
      const url = `${this.o.api}/v1/events/stream?events=${this.o.types.join(',')}`;
      const res = await fetch(url, {
        headers: {
          authorization: `Bearer ${this.o.key}`,
          accept: 'text/event-stream',
          ...(this.lastEventId !== undefined && { 'last-event-id': this.lastEventId }),
        },
        signal: connection.signal,
      });
      if (res.status === 429 || res.status >= 500) {
        const after = Number(res.headers.get('retry-after'));
        throw new Dropped(await errorMessage(res), after > 0 ? after * 1000 : undefined);
      }
      if (res.status !== 200 || !res.body)
        throw new ListenFailure(`the service refused the stream: ${await errorMessage(res)}`);
      if (this.announced) {
        const after = this.lastEventId?.startsWith('evt_') ? `, after ${this.lastEventId}` : '';
        this.o.err(`reconnected${after}`);
      }
      this.opened = true;
      const reader = new SseReader();
      const decoder = new TextDecoder();
      watch();
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        clearTimeout(silence);
        for (const message of reader.push(decoder.decode(chunk, { stream: true })))
          await this.handle(message);
        // Ready once the opening (which says where the stream starts) is read: from then on
        // a drop loses nothing.
        if (!this.announced) this.ready();
        watch();
      }
    } catch (err) {
      const why: unknown = connection.signal.reason;
      if (why instanceof Dropped && !this.o.stop.aborted) throw why;
      throw err;
    } finally {
      clearTimeout(silence);
      this.o.stop.removeEventListener('abort', abort);
    }
  }

  private ready(): void {
    this.announced = true;
    this.o.out(`Ready: forwarding events of ${this.o.api} to ${this.o.forwardTo} (Ctrl-C to quit)`);
  }

  private async handle(message: SseEvent): Promise<void> {
    if (message.event === 'end') {
      let why = message.data;
      try {
        why = (JSON.parse(message.data) as { reason?: string }).reason ?? why;
      } catch {
        // shown as it came
      }
      throw new ListenFailure(`the service ended the stream for good (${why})`);
    }
    // Where the stream starts: resumed from after a drop that comes before any event.
    if (message.id !== undefined && message.event === undefined && message.data === '') {
      this.lastEventId = message.id;
      return;
    }
    // Only stored events have an id; anything else (presence) is not a webhook's.
    if (message.id === undefined || message.event === undefined) return;
    await this.forward(message.id, message.event, Buffer.from(message.data));
    this.lastEventId = message.id;
  }

  private async forward(id: string, type: string, body: Buffer): Promise<void> {
    const headers = deliveryHeaders({
      secret: this.o.secret,
      eventId: id,
      attempt: 1,
      timestampSeconds: Math.floor(Date.now() / 1000),
      body,
    });
    try {
      const res = await fetch(this.o.forwardTo, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.any([this.o.stop, AbortSignal.timeout(DELIVERY_TIMEOUT_MS)]),
      });
      await res.body?.cancel().catch(() => undefined);
      this.o.out(`${res.status} ${type} ${id}`);
    } catch (err) {
      if (this.o.stop.aborted) return;
      this.o.out(`ERR ${type} ${id} (${reason(err)})`);
    }
  }
}

interface CommandOptions {
  forwardTo: string;
  events?: string[];
  apiUrl?: string;
}

/** `switchboard listen`: the live events of an account, forwarded to a local receiver. */
export function registerListen(program: Command): void {
  program
    .command('listen')
    .description(
      'forward the live events of the account of SWITCHBOARD_API_KEY to a local URL, signed as webhook deliveries',
    )
    .requiredOption(
      '--forward-to <url>',
      'where to POST each event (http:// is fine: any address, no TLS needed)',
      receiverUrl,
    )
    .option('--events <types>', 'comma-separated event types (default: all)', eventTypes)
    .option('--url, --api-url <url>', `the service (default ${DEFAULT_API_URL})`, serviceUrl)
    .action(async (opts: CommandOptions) => {
      const fail = (message: string) => {
        process.stderr.write(`switchboard listen: ${message}\n`);
        process.exitCode = 1;
      };
      const key = process.env.SWITCHBOARD_API_KEY;
      if (!key) return fail('set SWITCHBOARD_API_KEY to the API key of the account (sb_live_…)');
      const api = opts.apiUrl ?? DEFAULT_API_URL;
      const { secret, file } = await listenSecret(api, key);
      process.stdout.write(`Signing secret: ${secret} (kept in ${file})\n`);
      const stop = new AbortController();
      const quit = () => stop.abort();
      process.once('SIGINT', quit);
      process.once('SIGTERM', quit);
      try {
        await new Listener({
          api,
          key,
          forwardTo: opts.forwardTo,
          types: opts.events ?? EVENT_TYPES,
          secret,
          out: (line) => process.stdout.write(`${line}\n`),
          err: (line) => process.stderr.write(`${line}\n`),
          stop: stop.signal,
        }).run();
      } catch (err) {
        if (err instanceof ListenFailure) return fail(err.message);
        throw err;
      } finally {
        process.off('SIGINT', quit);
        process.off('SIGTERM', quit);
      }
    });
}
