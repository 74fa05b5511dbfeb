import http from 'node:http';

export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/**
 * A Server-Sent Events client over a real socket that parses the response as it arrives
 * (`app.inject` would wait for the end of a stream that never ends).
 */
export class SseClient {
  readonly messages: SseMessage[] = [];
  readonly comments: string[] = [];
  retry: number | null = null;
  /** The whole body, for a refusal. */
  body = '';
  ended = false;
  private buffer = '';
  private readonly waiters = new Set<() => void>();

  private constructor(
    readonly status: number,
    readonly headers: http.IncomingHttpHeaders,
    private readonly req: http.ClientRequest,
    res: http.IncomingMessage,
  ) {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      this.body += chunk;
      this.buffer += chunk;
      this.parse();
      this.notify();
    });
    const end = () => {
      this.ended = true;
      this.notify();
    };
    res.on('end', end);
    res.on('close', end);
    res.on('error', end);
  }

  /** Resolves once the response's headers have arrived. */
  static open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) =>
        resolve(new SseClient(res.statusCode ?? 0, res.headers, req, res)),
      );
      req.on('error', reject);
    });
  }

  /** The messages' envelopes, parsed. */
  get events(): { sseId?: string; sseEvent?: string; body: Record<string, unknown> }[] {
    return this.messages.map((m) => ({
      sseId: m.id,
      sseEvent: m.event,
      body: JSON.parse(m.data) as Record<string, unknown>,
    }));
  }

  /** Waits until `ok()` holds, failing after `timeoutMs` with what was received. */
  async until(ok: () => boolean, timeoutMs = 5_000, what = 'condition'): Promise<void> {
    if (ok()) return;
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!ok()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}; received:\n${this.body}`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  close(): void {
    this.req.destroy();
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end < 0) return;
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const message: SseMessage = { data: '' };
      let hasData = false;
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          this.comments.push(line.slice(1).trim());
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') message.id = value;
        else if (field === 'event') message.event = value;
        else if (field === 'retry') this.retry = Number(value);
        else if (field === 'data') {
          message.data = hasData ? `${message.data}\n${value}` : value;
          hasData = true;
        }
      }
      if (hasData) this.messages.push(message);
    }
  }
}
