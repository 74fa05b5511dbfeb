/**
 * The Switchboard webchat widget: one script tag,
 * `<script src="{PUBLIC_URL}/widget.js" data-widget-key="wk_…" async></script>`.
 * Everything lives in an open shadow root (the page's CSS cannot reach it) and talks only to
 * the service the script came from.
 */
import { Api, ApiError, type ChatMessage, type IdentifyInput, type Session } from './api.js';
import { STYLES } from './styles.js';

interface Item {
  /** The key of its element: the client id of the visitor's own messages, else the message id. */
  key: string;
  id: string | null;
  clientId: string | null;
  author: 'visitor' | 'team';
  content: string;
  createdAt: string;
  state: 'sent' | 'pending' | 'failed';
  /** A failure the widget retries by itself once it is connected again (a network failure). */
  retryOnReconnect: boolean;
}

interface SwitchboardApi {
  identify(input: IdentifyInput): Promise<void>;
  open(): void;
  close(): void;
  /** Forgets this browser's visitor (a sign-out): the next load starts a new conversation. */
  reset(): void;
}

declare global {
  interface Window {
    Switchboard?: SwitchboardApi;
    /** Set before the script loads to identify the visitor at once. */
    SwitchboardIdentity?: IdentifyInput;
  }
}

const ICON =
  '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H8l-4 4V6a2 2 0 0 1 2-2z"/></svg>';

function uuid(): string {
  // randomUUID needs a secure context (https or localhost); plain http pages have only this.
  if (typeof crypto.randomUUID === 'function' && window.isSecureContext) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  text?: string,
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function timeOf(iso: string): string {
  return new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

class Widget {
  private readonly api: Api;
  private readonly storeKey: string;
  private session: Session | null = null;
  private readonly items = new Map<string, Item>();
  private readonly byId = new Map<string, string>();
  private readonly sending = new Set<string>();
  private readonly delivered = new Set<string>();
  private readonly read = new Set<string>();
  private since: string | null = null;
  private stream: EventSource | null = null;
  private reconnectTimer: number | undefined;
  private reconnectDelay = 1000;
  private ready: Promise<void>;
  private isOpen = false;

  // Elements
  private readonly root: HTMLDivElement;
  private readonly launcher: HTMLButtonElement;
  private readonly panel: HTMLDivElement;
  private readonly titleEl: HTMLHeadingElement;
  private readonly statusEl: HTMLSpanElement;
  private readonly notice: HTMLParagraphElement;
  private readonly greeting: HTMLParagraphElement;
  private readonly list: HTMLUListElement;
  private readonly logEl: HTMLDivElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;

  constructor(base: string, widgetKey: string) {
    this.api = new Api(base, widgetKey);
    this.storeKey = `switchboard:${widgetKey}`;

    const host = el('div', { 'data-switchboard-widget': '' });
    const shadow = host.attachShadow({ mode: 'open' });
    const style = el('style');
    style.textContent = STYLES;
    this.root = el('div', { class: 'root' });
    this.launcher = el('button', {
      class: 'launcher',
      type: 'button',
      'aria-label': 'Open chat',
      'aria-expanded': 'false',
      'aria-controls': 'sb-panel',
    });
    this.launcher.innerHTML = ICON;
    this.panel = el('div', {
      class: 'panel',
      id: 'sb-panel',
      role: 'dialog',
      'aria-labelledby': 'sb-title',
    });
    this.panel.hidden = true;
    const header = el('header');
    const heading = el('div');
    this.titleEl = el('h2', { id: 'sb-title' }, 'Chat');
    this.statusEl = el('span', { class: 'status', 'aria-live': 'polite' });
    heading.append(this.titleEl, this.statusEl);
    const close = el('button', { class: 'close', type: 'button', 'aria-label': 'Close chat' }, '×');
    header.append(heading, close);
    this.notice = el('p', { class: 'notice', role: 'status' });
    this.notice.hidden = true;
    this.logEl = el('div', { class: 'log', role: 'log', 'aria-label': 'Conversation' });
    this.greeting = el('p', { class: 'greeting' });
    this.greeting.hidden = true;
    this.list = el('ul', { role: 'list' });
    this.logEl.append(this.greeting, this.list);
    const form = el('form');
    this.input = el('textarea', {
      'aria-label': 'Message',
      rows: '1',
      placeholder: 'Write a message…',
    });
    this.sendButton = el('button', { class: 'send', type: 'submit' }, 'Send');
    form.append(this.input, this.sendButton);
    this.panel.append(header, this.notice, this.logEl, form);
    this.root.append(this.panel, this.launcher);
    shadow.append(style, this.root);
    document.body.appendChild(host);

    this.launcher.addEventListener('click', () => (this.isOpen ? this.close() : this.open()));
    close.addEventListener('click', () => this.close());
    this.panel.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') this.close();
    });
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.submit();
    });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit();
      }
    });
    document.addEventListener('visibilitychange', () => this.markRead());
    window.addEventListener('online', () => this.reconnect(0));

    // Nothing can be sent before the session starts.
    this.setEnabled(false);
    this.restoreOutbox();
    this.ready = this.start();
  }

  get public(): SwitchboardApi {
    return {
      identify: (input) => this.identify(input),
      open: () => this.open(),
      close: () => this.close(),
      reset: () => {
        localStorage.removeItem(`${this.storeKey}:token`);
        localStorage.removeItem(`${this.storeKey}:outbox`);
      },
    };
  }

  // ---- session and history ----

  private async start(): Promise<void> {
    for (let delay = 1000; ; delay = Math.min(delay * 2, 15000)) {
      try {
        await this.useSession(
          await this.api.startSession(localStorage.getItem(`${this.storeKey}:token`)),
        );
        break;
      } catch (err) {
        if (err instanceof ApiError && err.status < 500 && err.status !== 429) {
          this.showNotice('The chat is not available on this page.');
          this.setEnabled(false);
          throw err;
        }
        this.setStatus('Connecting…');
        await new Promise((r) => setTimeout(r, delay));
      }
    }
    const preset = window.SwitchboardIdentity;
    if (preset) await this.identify(preset, false);
    else await this.afterSession();
  }

  private async useSession(session: Session): Promise<void> {
    this.session = session;
    this.api.token = session.token;
    localStorage.setItem(`${this.storeKey}:token`, session.token);
    const w = session.widget;
    this.root.style.setProperty('--accent', /^#[0-9a-f]{6}$/i.test(w.color) ? w.color : '#2563eb');
    this.titleEl.textContent = w.title;
    this.greeting.textContent = w.greeting ?? '';
    this.greeting.hidden = !w.greeting;
  }

  private get blocked(): boolean {
    const s = this.session;
    return !s || (s.widget.identity_verification === 'required' && !s.visitor.identified);
  }

  /** Reads the conversation and opens the live stream, unless the visitor may not. */
  private async afterSession(): Promise<void> {
    if (this.blocked) {
      this.closeStream();
      this.showNotice('Please sign in to chat with us.');
      this.setEnabled(false);
      return;
    }
    this.showNotice(null);
    this.setEnabled(true);
    try {
      for (const m of await this.api.messages()) this.merge(m);
    } catch {
      // The stream's catch-up reads them once it connects.
    }
    this.connect();
    this.flushOutbox();
  }

  private async identify(input: IdentifyInput, wait = true): Promise<void> {
    if (wait) await this.ready.catch(() => undefined);
    try {
      await this.useSession(await this.api.identify(input));
    } catch (err) {
      this.showNotice(
        err instanceof ApiError ? 'We could not verify who you are.' : 'Connection lost.',
      );
      if (wait) throw err;
    }
    // Another contact's conversation may now be this visitor's: start over from it.
    this.items.clear();
    this.byId.clear();
    this.since = null;
    this.restoreOutbox();
    this.render();
    await this.afterSession();
  }

  // ---- live stream ----

  private connect(): void {
    this.closeStream();
    if (this.blocked) return;
    const stream = new EventSource(this.api.streamUrl(this.since));
    this.stream = stream;
    stream.onopen = () => {
      this.reconnectDelay = 1000;
      this.setStatus('');
      this.flushOutbox();
    };
    stream.onmessage = (e: MessageEvent<string>) => {
      this.merge(JSON.parse(e.data) as ChatMessage);
    };
    stream.onerror = () => {
      this.setStatus('Reconnecting…');
      // EventSource retries by itself after a dropped connection; after a refusal it gives up.
      if (stream.readyState === EventSource.CLOSED) this.reconnect(this.reconnectDelay);
    };
  }

  private reconnect(delay: number): void {
    if (!this.session || this.blocked) return;
    if (this.stream && this.stream.readyState === EventSource.OPEN && delay > 0) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = window.setTimeout(() => {
      this.reconnectDelay = Math.min(this.reconnectDelay * 2, 15000);
      // A token the service no longer knows (a reset store) starts a new session.
      void this.api
        .messages(this.since ?? undefined)
        .then((ms) => {
          ms.forEach((m) => this.merge(m));
          this.connect();
        })
        .catch((err: unknown) => {
          if (err instanceof ApiError && err.status === 401) {
            this.ready = this.start();
            return;
          }
          this.reconnect(this.reconnectDelay);
        });
    }, delay);
  }

  private closeStream(): void {
    this.stream?.close();
    this.stream = null;
  }

  // ---- messages ----

  private merge(m: ChatMessage): void {
    const key =
      this.byId.get(m.id) ?? (m.client_id && this.items.has(m.client_id) ? m.client_id : m.id);
    this.byId.set(m.id, key);
    this.items.set(key, {
      key,
      id: m.id,
      clientId: m.client_id,
      author: m.author,
      content: m.content ?? m.media_url ?? '',
      createdAt: m.created_at,
      state: 'sent',
      retryOnReconnect: false,
    });
    if (!this.since || m.created_at > this.since) this.since = m.created_at;
    if (m.client_id) this.forgetOutbox(m.client_id);
    this.render();
    if (m.author === 'team' && !this.delivered.has(m.id)) {
      this.delivered.add(m.id);
      this.queueReceipt('delivered', m.id);
    }
    this.markRead();
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (!text || this.blocked) return;
    this.input.value = '';
    const clientId = uuid();
    const item: Item = {
      key: clientId,
      id: null,
      clientId,
      author: 'visitor',
      content: text,
      createdAt: new Date().toISOString(),
      state: 'pending',
      retryOnReconnect: false,
    };
    this.items.set(clientId, item);
    this.saveOutbox();
    this.render();
    void this.trySend(item);
  }

  /** Sends (again) a message not yet acknowledged; one attempt at a time per message. */
  private async trySend(item: Item): Promise<void> {
    if (this.sending.has(item.key) || item.id !== null) return;
    this.sending.add(item.key);
    item.state = 'pending';
    this.render();
    try {
      this.merge(await this.api.send(item.clientId!, item.content));
    } catch (err) {
      item.state = 'failed';
      // Refused for a reason of its own (too long, not allowed): only the visitor retries it.
      item.retryOnReconnect = !(err instanceof ApiError) || err.status >= 500 || err.status === 429;
      this.render();
    } finally {
      this.sending.delete(item.key);
    }
  }

  private flushOutbox(): void {
    if (this.blocked) return;
    for (const item of this.items.values())
      if (item.id === null && (item.state === 'pending' || item.retryOnReconnect))
        void this.trySend(item);
  }

  // Messages not yet acknowledged by the service survive a reload, and are sent again (with the
  // same client id: the service keeps one).
  private saveOutbox(): void {
    const unsent = [...this.items.values()].filter((i) => i.id === null);
    localStorage.setItem(
      `${this.storeKey}:outbox`,
      JSON.stringify(
        unsent.map((i) => ({ clientId: i.clientId, content: i.content, createdAt: i.createdAt })),
      ),
    );
  }

  private forgetOutbox(clientId: string): void {
    const raw = localStorage.getItem(`${this.storeKey}:outbox`);
    if (raw && raw.includes(clientId)) this.saveOutbox();
  }

  private restoreOutbox(): void {
    try {
      const saved = JSON.parse(localStorage.getItem(`${this.storeKey}:outbox`) ?? '[]') as {
        clientId: string;
        content: string;
        createdAt: string;
      }[];
      for (const s of saved)
        this.items.set(s.clientId, {
          key: s.clientId,
          id: null,
          clientId: s.clientId,
          author: 'visitor',
          content: s.content,
          createdAt: s.createdAt,
          state: 'failed',
          retryOnReconnect: true,
        });
    } catch {
      // an unreadable outbox is dropped
    }
  }

  // ---- receipts ----

  private pendingReceipts: Record<'delivered' | 'read', string[]> = { delivered: [], read: [] };
  private receiptTimer: number | undefined;

  private queueReceipt(status: 'delivered' | 'read', id: string): void {
    this.pendingReceipts[status].push(id);
    clearTimeout(this.receiptTimer);
    this.receiptTimer = window.setTimeout(() => void this.sendReceipts(), 50);
  }

  private async sendReceipts(): Promise<void> {
    const { delivered, read } = this.pendingReceipts;
    this.pendingReceipts = { delivered: [], read: [] };
    try {
      if (delivered.length) await this.api.receipts('delivered', delivered);
      if (read.length) await this.api.receipts('read', read);
    } catch {
      // Lost receipts are sent again after the next reload; statuses only move forward.
      delivered.forEach((id) => this.delivered.delete(id));
      read.forEach((id) => this.read.delete(id));
    }
  }

  /** The visitor has seen the team's messages when the chat is open on a visible page. */
  private markRead(): void {
    if (!this.isOpen || document.visibilityState !== 'visible') return;
    for (const item of this.items.values())
      if (item.author === 'team' && item.id && !this.read.has(item.id)) {
        this.read.add(item.id);
        this.queueReceipt('read', item.id);
      }
  }

  // ---- view ----

  private open(): void {
    this.isOpen = true;
    this.panel.hidden = false;
    this.root.classList.add('open');
    this.launcher.setAttribute('aria-expanded', 'true');
    this.scrollDown();
    (this.input.disabled
      ? this.panel.querySelector<HTMLButtonElement>('.close')!
      : this.input
    ).focus();
    this.markRead();
  }

  private close(): void {
    this.isOpen = false;
    this.panel.hidden = true;
    this.root.classList.remove('open');
    this.launcher.setAttribute('aria-expanded', 'false');
    this.launcher.focus();
  }

  private render(): void {
    const items = [...this.items.values()].sort((a, b) =>
      a.createdAt === b.createdAt ? 0 : a.createdAt < b.createdAt ? -1 : 1,
    );
    const atBottom = this.logEl.scrollHeight - this.logEl.scrollTop - this.logEl.clientHeight < 40;
    this.list.replaceChildren(
      ...items.map((item) => {
        const li = el('li', { role: 'listitem', class: `${item.author} ${item.state}` });
        li.append(el('span', { class: 'text' }, item.content));
        const meta = el('span', { class: 'meta' });
        const who = item.author === 'team' ? 'Team' : 'You';
        if (item.state === 'failed') {
          meta.textContent = 'Not sent.';
          const retry = el('button', { class: 'retry', type: 'button' }, 'Retry');
          retry.addEventListener('click', () => void this.trySend(item));
          meta.append(retry);
        } else if (item.state === 'pending') {
          meta.textContent = 'Sending…';
        } else {
          meta.append(
            `${who} · `,
            el('time', { datetime: item.createdAt }, timeOf(item.createdAt)),
          );
        }
        li.append(meta);
        return li;
      }),
    );
    if (atBottom) this.scrollDown();
  }

  private scrollDown(): void {
    this.logEl.scrollTop = this.logEl.scrollHeight;
  }

  private setEnabled(enabled: boolean): void {
    this.input.disabled = !enabled;
    this.sendButton.disabled = !enabled;
  }

  private setStatus(text: string): void {
    this.statusEl.textContent = text ? ` · ${text}` : '';
  }

  private showNotice(text: string | null): void {
    this.notice.textContent = text ?? '';
    this.notice.hidden = !text;
  }
}

function boot(): void {
  if (window.Switchboard) return; // loaded twice
  const script =
    (document.currentScript as HTMLScriptElement | null) ??
    document.querySelector<HTMLScriptElement>('script[data-widget-key]');
  const key = script?.dataset.widgetKey;
  if (!script || !key) return;
  const base = script.src.replace(/\/widget\.js(\?.*)?$/, '');
  const start = () => {
    window.Switchboard = new Widget(base, key).public;
  };
  if (document.body) start();
  else document.addEventListener('DOMContentLoaded', start);
}

boot();
