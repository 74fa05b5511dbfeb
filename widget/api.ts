/** The widget's side of the visitor endpoints (`/webchat/v1/{widget_key}/…`). */

export interface WidgetSettings {
  title: string;
  greeting: string | null;
  color: string;
  identity_verification: 'off' | 'required';
}

export interface Session {
  token: string;
  visitor: { id: string; identified: boolean };
  widget: WidgetSettings;
}

export interface ChatMessage {
  id: string;
  client_id: string | null;
  author: 'visitor' | 'team';
  type: 'text' | 'template' | 'image' | 'document';
  content: string | null;
  media_url: string | null;
  created_at: string;
}

export interface IdentifyInput {
  identifier: string;
  identifier_hash: string;
  name?: string;
  email?: string;
}

/** A refusal by the service (4xx/5xx), as opposed to a network failure. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class Api {
  token: string | null = null;

  constructor(
    private readonly base: string,
    private readonly widgetKey: string,
  ) {}

  url(path: string): string {
    return `${this.base}/webchat/v1/${encodeURIComponent(this.widgetKey)}/${path}`;
  }

  startSession(token: string | null): Promise<Session> {
    return this.call<Session>('POST', 'session', token ? { token } : {});
  }

  identify(input: IdentifyInput): Promise<Session> {
    return this.call<Session>('POST', 'identify', input);
  }

  async messages(since?: string): Promise<ChatMessage[]> {
    const q = since ? `?since=${encodeURIComponent(since)}` : '';
    return (await this.call<{ data: ChatMessage[] }>('GET', `messages${q}`)).data;
  }

  send(clientId: string, content: string): Promise<ChatMessage> {
    return this.call<ChatMessage>('POST', 'messages', { client_id: clientId, content });
  }

  async receipts(status: 'delivered' | 'read', ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += 100)
      await this.call('POST', 'receipts', { status, message_ids: ids.slice(i, i + 100) });
  }

  streamUrl(since: string | null): string {
    const q = new URLSearchParams({ token: this.token ?? '' });
    if (since) q.set('since', since);
    return this.url(`stream?${q.toString()}`);
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {};
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(this.url(path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      mode: 'cors',
      credentials: 'omit',
    });
    const text = await res.text();
    if (!res.ok) {
      let message = `HTTP ${res.status}`;
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // not JSON
      }
      throw new ApiError(res.status, message);
    }
    return (text ? JSON.parse(text) : {}) as T;
  }
}
