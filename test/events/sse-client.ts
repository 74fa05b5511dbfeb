import http from 'node:http';

export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/**
 * A Server-Sent Events client over a real socket that parses the response as it arrives
 * (`app.inject` would wait for the end of a stream that never ends). Lines may end in CRLF, CR
 * or LF; a block is dispatched on a blank line if it had data; `id:` is the block's own.
 */
export class SseClient {
  readonly messages: SseMessage[] = [];
  readonly comments: string[] = [];
  retry: number | null = null;
  /** The last `id:` of a completed block, with data or not, as EventSource keeps it. */
  lastEventId: string | undefined;
  /** The whole body, for a refusal. */
  body = '';
  ended = false;
  private buffer = '';
  private block: SseMessage = { data: '' };
  private blockHasData = false;
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
      // No agent: the stream has a connection of its own, closed with it.
      const req = http.get(
        url,
        { agent: false, headers: { accept: 'text/event-stream', ...headers } },
        (res) => resolve(new SseClient(res.statusCode ?? 0, res.headers, req, res)),
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
    // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
    for (;;) {
      const m = /\r\n|\r(?!$)|\n/.exec(this.buffer);
      if (!m) return;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.block.id !== undefined) this.lastEventId = this.block.id;
      if (this.blockHasData) this.messages.push(this.block);
      this.block = { data: '' };
      this.blockHasData = false;
      return;
    }
    if (line.startsWith(':')) {
      this.comments.push(line.slice(1).trim());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') {
      if (!value.includes('\0')) this.block.id = value;
    } else if (field === 'event') this.block.event = value;
    else if (field === 'retry') {
      if (/^\d+$/.test(value)) this.retry = Number(value);
    } else if (field === 'data') {
      this.block.data = this.blockHasData ? `${this.block.data}\n${value}` : value;
      this.blockHasData = true;
    }
  }
}
