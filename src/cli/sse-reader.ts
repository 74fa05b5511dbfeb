/** One Server-Sent Events message as a client sees it. */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/**
 * The Server-Sent Events parser of a client (the WHATWG rules, less `retry:`): fed the text as
 * it comes, it returns the messages that a blank line has completed; a message cut off by a
 * dropped connection is never returned. Comments (`: keep-alive`) are skipped. A message with
 * an `id:` and no data (where a stream starts) is returned with `data: ''` and no `event`:
 * EventSource fires nothing for it but keeps the id, and so must its user.
 */
export class SseReader {
  private buffer = '';
  private id: string | undefined;
  private event: string | undefined;
  private data: string[] = [];

  push(text: string): SseEvent[] {
    this.buffer += text;
    const done: SseEvent[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (end === -1 || (end === this.buffer.length - 1 && this.buffer[end] === '\r')) break;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith('\r\n', end) ? 2 : 1));
      const message = this.line(line);
      if (message) done.push(message);
    }
    return done;
  }

  private line(line: string): SseEvent | null {
    if (line === '') {
      let message: SseEvent | null = null;
      if (this.data.length > 0)
        message = { id: this.id, event: this.event, data: this.data.join('\n') };
      else if (this.id !== undefined) message = { id: this.id, data: '' };
      this.id = undefined;
      this.event = undefined;
      this.data = [];
      return message;
    }
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') this.id = value;
    else if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    return null;
  }
}
