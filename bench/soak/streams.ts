/**
 * The soak's live event streams: clients of `GET /v1/events/stream` through the load spreader,
 * each recording the id of every event it got and, when its stream ends or fails (a killed API
 * process, a restart), reconnecting with `Last-Event-ID` as EventSource does.
 */
import http from 'node:http';

export class EventStreamClient {
  /** Ids of the events received (`pos_…` positions are not events). */
  readonly ids = new Set<string>();
  duplicates = 0;
  reconnects = 0;
  /** Openings answered other than 200 (a 503 while the database restarts, a 429). */
  refused: Record<string, number> = {};
  private lastId: string | null = null;
  private req: http.ClientRequest | null = null;
  private closed = false;
  private opened = false;
  private resolveOpened: () => void = () => undefined;
  /** Resolves once the stream has first answered 200. */
  readonly ready = new Promise<void>((resolve) => (this.resolveOpened = resolve));

  constructor(
    private readonly url: string,
    private readonly apiKey: string,
  ) {}

  open(): void {
    if (this.closed) return;
    const target = new URL(this.url);
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        headers: {
          accept: 'text/event-stream',
          authorization: `Bearer ${this.apiKey}`,
          ...(this.lastId ? { 'last-event-id': this.lastId } : {}),
        },
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) {
          const key = String(res.statusCode ?? 0);
          this.refused[key] = (this.refused[key] ?? 0) + 1;
          res.resume();
          res.on('end', () => this.again());
          return;
        }
        if (!this.opened) {
          this.opened = true;
          this.resolveOpened();
        }
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            this.block(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        });
        res.on('error', () => undefined);
        res.on('close', () => this.again());
      },
    );
    req.on('error', () => this.again());
    req.end();
    this.req = req;
  }

  private block(block: string): void {
    let id: string | null = null;
    let hasData = false;
    for (const line of block.split('\n')) {
      if (line.startsWith('id:')) id = line.slice(3).trim();
      else if (line.startsWith('data:')) hasData = true;
    }
    if (id === null) return;
    this.lastId = id;
    if (!hasData || id.startsWith('pos_')) return;
    if (this.ids.has(id)) this.duplicates++;
    else this.ids.add(id);
  }

  private again(): void {
    if (this.closed || this.req === null) return;
    this.req = null;
    this.reconnects++;
    setTimeout(() => this.open(), 500);
  }

  close(): void {
    this.closed = true;
    this.req?.destroy();
  }
}

/** Opens `count` streams and waits until each has answered once. */
export async function openStreams(
  baseUrl: string,
  apiKey: string,
  count: number,
): Promise<EventStreamClient[]> {
  const streams = Array.from(
    { length: count },
    () => new EventStreamClient(`${baseUrl}/v1/events/stream`, apiKey),
  );
  for (const s of streams) s.open();
  await Promise.race([
    Promise.all(streams.map((s) => s.ready)),
    new Promise((_, reject) =>
      setTimeout(() => reject(new Error('the event streams did not all open within 30 s')), 30_000),
    ),
  ]);
  return streams;
}
