/**
 * The Switchboard webchat widget: one script tag,
 * `<script src="{PUBLIC_URL}/widget.js" data-widget-key="wk_…" async></script>`.
 * Everything lives in an open shadow root (the page's CSS cannot reach it) and talks only to
 * the service the script came from (and, for a reply with a picture or a file, its URL).
 */
import { Api, ApiError, type ChatMessage, type IdentifyInput, type Session } from './api.js';
import { STYLES } from './styles.js';

interface Item {
  /** The key of its element: the client id of the visitor's own messages, else the message id. */
  key: string;
  id: string | null;
  clientId: string | null;
  author: 'visitor' | 'team';
  type: ChatMessage['type'];
  /** The text, or a file's caption. */
  content: string;
  mediaUrl: string | null;
  createdAt: string;
  state: 'sent' | 'pending' | 'failed';
  /** A failure the widget retries by itself once it is connected again (a network failure). */
  retryOnReconnect: boolean;
  /** Why the service refused it (a 4xx): shown, and never sent again without the visitor. */
  error: string | null;
}

/** An item's element, kept for the item's life: the log gets additions, not a rebuilt list. */
interface ItemNode {
  li: HTMLLIElement;
  meta: HTMLSpanElement;
  body: string;
  metaKey: string;
}

interface SwitchboardApi {
  identify(input: IdentifyInput): Promise<void>;
  open(): void;
  close(): void;
  /** Forgets this browser's visitor (a sign-out): the conversation goes, a new one starts. */
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

/** The stream sends at least a ping every 20 s: this long without anything, it is dead. */
const SILENCE_MS = 45_000;
const SIGN_IN = 'Please sign in to chat with us.';
const UNAVAILABLE = 'The chat is not available on this page.';

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** White or near-black (#111827), whichever contrasts more with `hex` (#rrggbb). */
function textOn(hex: string): string {
  const lin = (i: number) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const l = 0.2126 * lin(1) + 0.7152 * lin(3) + 0.0722 * lin(5) + 0.05;
  // Contrast ratios: white 1.05 / l, #111827 (relative luminance 0.009) l / 0.059.
  return 1.05 / l >= l / 0.059 ? '#fff' : '#111827';
}

/**
 * Whether the widget can load a message's file: an http(s) URL, but not the API's own
 * `/v1/media/{id}` (files received on other channels), which needs an API key.
 */
function loadable(url: string): boolean {
  return /^https?:\/\//i.test(url) && !/\/v1\/media\/med_/.test(url);
}

class Widget {
  private readonly api: Api;
  private readonly storeKey: string;
  private session: Session | null = null;
  private readonly items = new Map<string, Item>();
  private readonly nodes = new Map<string, ItemNode>();
  private readonly byId = new Map<string, string>();
  private readonly sending = new Set<string>();
  private readonly delivered = new Set<string>();
  private readonly read = new Set<string>();
  private since: string | null = null;
  private stream: EventSource | null = null;
  private heardAt = 0;
  private watchdog: number | undefined;
  private reconnectTimer: number | undefined;
  private reconnectDelay = 1000;
  /** Before a session starts again after the stream ended: grows while it keeps ending. */
  private restartDelay = 0;
  private restarting = false;
  /** Set when the stream ended for good (origin refused, webchat gone): nothing more is tried. */
  private stopped = false;
  /** The stream gave way to another tab's: it opens again when this page is looked at. */
  private parked = false;
  /** Bumped by reset(): answers to requests made before it are dropped. */
  private epoch = 0;
  /** What the page identified with (undefined: window.SwitchboardIdentity; null: nothing). */
  private identity: IdentifyInput | null | undefined = undefined;
  private ready: Promise<void>;
  private isOpen = false;

  // Elements
  private readonly shadow: ShadowRoot;
  private readonly root: HTMLDivElement;
  private readonly launcher: HTMLButtonElement;
  private readonly panel: HTMLDivElement;
  private readonly closeButton: HTMLButtonElement;
  private readonly titleEl: HTMLHeadingElement;
  private readonly statusEl: HTMLSpanElement;
  private readonly notice: HTMLParagraphElement;
  private readonly greeting: HTMLParagraphElement;
  private readonly list: HTMLUListElement;
  private readonly logEl: HTMLDivElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  /** The layout where the open panel covers the whole page (a modal dialog). */
  private readonly phone = window.matchMedia('(max-width: 480px)');

  constructor(
    base: string,
    widgetKey: string,
    private readonly silenceMs = SILENCE_MS,
  ) {
    this.api = new Api(base, widgetKey);
    this.storeKey = `switchboard:${widgetKey}`;

    // An element name of its own, so that page rules for div (or any known tag) miss it.
    const host = document.createElement('switchboard-chat');
    this.shadow = host.attachShadow({ mode: 'open' });
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
    this.closeButton = el(
      'button',
      { class: 'close', type: 'button', 'aria-label': 'Close chat' },
      '×',
    );
    header.append(heading, this.closeButton);
    this.notice = el('p', { class: 'notice', role: 'status' });
    this.notice.hidden = true;
    // Focusable, so that a keyboard can scroll the conversation.
    this.logEl = el('div', {
      class: 'log',
      role: 'log',
      'aria-label': 'Conversation',
      tabindex: '0',
    });
    this.greeting = el('p', { class: 'greeting' });
    this.greeting.hidden = true;
    this.list = el('ul', { role: 'list' });
    this.logEl.append(this.greeting, this.list);
    const form = el('form');
    this.input = el('textarea', {
      'aria-label': 'Message',
      rows: '1',
      maxlength: '4096',
      placeholder: 'Write a message…',
    });
    this.sendButton = el('button', { class: 'send', type: 'submit' }, 'Send');
    form.append(this.input, this.sendButton);
    this.panel.append(header, this.notice, this.logEl, form);
    this.root.append(this.panel, this.launcher);
    this.shadow.append(style, this.root);
    document.body.appendChild(host);

    this.launcher.addEventListener('click', () => (this.isOpen ? this.close() : this.open()));
    this.closeButton.addEventListener('click', () => this.close());
    this.panel.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') this.close();
      else if (e.key === 'Tab' && this.panel.hasAttribute('aria-modal')) this.keepFocus(e);
    });
    this.phone.addEventListener('change', () => this.updateModal());
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
    document.addEventListener('visibilitychange', () => {
      this.markRead();
      if (document.visibilityState === 'visible') this.unpark();
    });
    window.addEventListener('online', () => this.reconnect(0));

    // Nothing can be sent before the session starts.
    this.setEnabled(false);
    this.restoreOutbox();
    this.render();
    this.ready = this.start();
  }

  get public(): SwitchboardApi {
    return {
      identify: (input) => {
        this.identity = input;
        return this.identify(input);
      },
      open: () => this.open(),
      close: () => this.close(),
      reset: () => this.reset(),
    };
  }

  // ---- session and history ----

  private get tokenKey(): string {
    return `${this.storeKey}:token`;
  }

  /** Starts (or resumes, with the kept token) the session, identifies, reads, streams. */
  private async start(): Promise<void> {
    const epoch = this.epoch;
    for (let delay = 1000; ; delay = Math.min(delay * 2, 15000)) {
      try {
        const session = await this.api.startSession(localStorage.getItem(this.tokenKey));
        if (epoch !== this.epoch) return;
        this.useSession(session);
        break;
      } catch (err) {
        if (epoch !== this.epoch) return;
        if (err instanceof ApiError && err.status < 500 && err.status !== 429) {
          if (err.status === 403)
            console.error(
              `Switchboard webchat: this page's origin ${location.origin} is not allowed for this widget. ` +
                `Add "${location.origin}" to allowed_origins of the webchat connection ` +
                `(PUT /v1/channels/webchat). The service said: ${err.message}`,
            );
          this.stop(UNAVAILABLE);
          return;
        }
        this.setStatus('Connecting…');
        await sleep(delay);
      }
    }
    const identity = this.identity === undefined ? window.SwitchboardIdentity : this.identity;
    if (identity) await this.identify(identity, false).catch(() => undefined);
    else await this.afterSession();
  }

  private useSession(session: Session): void {
    this.session = session;
    this.api.token = session.token;
    localStorage.setItem(this.tokenKey, session.token);
    const w = session.widget;
    const accent = /^#[0-9a-f]{6}$/i.test(w.color) ? w.color : '#2563eb';
    this.root.style.setProperty('--accent', accent);
    this.root.style.setProperty('--on-accent', textOn(accent));
    this.titleEl.textContent = w.title;
    this.greeting.textContent = w.greeting ?? '';
    this.greeting.hidden = !w.greeting;
  }

  private get blocked(): boolean {
    const s = this.session;
    return (
      this.stopped || !s || (s.widget.identity_verification === 'required' && !s.visitor.identified)
    );
  }

  /** Reads the conversation and opens the live stream, unless the visitor may not. */
  private async afterSession(notice: string | null = null): Promise<void> {
    if (this.blocked) {
      this.closeStream();
      if (!this.stopped) this.showNotice(SIGN_IN);
      this.setEnabled(false);
      return;
    }
    this.showNotice(notice);
    this.setEnabled(true);
    const epoch = this.epoch;
    try {
      const messages = await this.api.messages();
      if (epoch !== this.epoch) return;
      // The visitor's conversation may not be the one shown (identified, or anonymous again):
      // what it does not hold goes; what both hold keeps its element.
      const ids = new Set(messages.map((m) => m.id));
      for (const [key, item] of this.items)
        if (item.id !== null && !ids.has(item.id)) {
          this.items.delete(key);
          this.byId.delete(item.id);
        }
      this.since = null;
      messages.forEach((m) => this.merge(m));
      this.render();
    } catch {
      // The stream's catch-up reads them once it connects.
    }
    this.connect();
    this.flushOutbox();
  }

  private async identify(input: IdentifyInput, wait = true): Promise<void> {
    if (wait) await this.ready;
    let notice: string | null = null;
    try {
      this.useSession(await this.api.identify(input));
    } catch (err) {
      notice = err instanceof ApiError ? 'We could not verify who you are.' : 'Connection lost.';
      this.showNotice(notice);
      // The page's call changed nothing; a start goes on as the visitor it is.
      if (wait) throw err;
    }
    await this.afterSession(notice);
  }

  /**
   * Starts the session again (the stream ended because the visitor must identify, or the
   * token is no longer known), waiting longer each time it happens again without a ping between.
   */
  private restart(): void {
    if (this.restarting || this.stopped) return;
    this.restarting = true;
    this.closeStream();
    clearTimeout(this.reconnectTimer);
    const delay = this.restartDelay;
    this.restartDelay = Math.min(Math.max(delay * 2, 1000), 60_000);
    this.reconnectTimer = window.setTimeout(() => {
      this.ready = this.start().finally(() => (this.restarting = false));
    }, delay);
  }

  /** Gives up for good: the page may no longer show this chat. */
  private stop(notice: string): void {
    this.stopped = true;
    this.closeStream();
    clearTimeout(this.reconnectTimer);
    this.setEnabled(false);
    this.showNotice(notice);
  }

  private reset(): void {
    this.epoch++;
    this.closeStream();
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.receiptTimer);
    localStorage.removeItem(this.tokenKey);
    localStorage.removeItem(`${this.storeKey}:outbox`);
    this.pendingReceipts = { delivered: [], read: [] };
    for (const set of [this.items, this.byId, this.sending, this.delivered, this.read]) set.clear();
    this.since = null;
    this.session = null;
    this.api.token = null;
    this.identity = null;
    this.stopped = this.restarting = this.parked = false;
    this.restartDelay = 0;
    this.setEnabled(false);
    this.showNotice(null);
    this.render();
    this.ready = this.start();
  }

  // ---- live stream ----

  private connect(): void {
    this.closeStream();
    this.parked = false;
    if (this.blocked) return;
    const stream = new EventSource(this.api.streamUrl(this.since));
    this.stream = stream;
    const heard = () => (this.heardAt = Date.now());
    heard();
    stream.onopen = () => {
      heard();
      this.reconnectDelay = 1000;
      this.setStatus('');
      this.flushOutbox();
    };
    stream.onmessage = (e: MessageEvent<string>) => {
      heard();
      this.merge(JSON.parse(e.data) as ChatMessage);
      this.render();
    };
    stream.addEventListener('ready', heard);
    stream.addEventListener('ping', () => {
      heard();
      this.restartDelay = 0;
    });
    stream.addEventListener('end', (e) => {
      const { reason } = JSON.parse((e as MessageEvent<string>).data) as { reason?: string };
      this.closeStream();
      if (reason === 'identify') this.restart();
      else if (reason === 'gone') this.stop('This chat is no longer available.');
      else if (reason === 'forbidden') this.stop(UNAVAILABLE);
      // A newer stream of this visitor took its place (another tab): this one waits until the
      // visitor looks at it again, rather than take the place back.
      else this.parked = true;
    });
    stream.onerror = () => {
      this.setStatus('Reconnecting…');
      // EventSource retries by itself after a dropped connection; after a refusal it gives up.
      if (stream.readyState !== EventSource.CLOSED) return;
      this.closeStream();
      this.reconnect(this.reconnectDelay);
    };
    // A connection can die without a word (a NAT forgetting it, Wi-Fi gone without `offline`):
    // nothing heard for silenceMs, not even a ping, and it is replaced.
    this.watchdog = window.setInterval(
      () => {
        if (Date.now() - this.heardAt < this.silenceMs) return;
        this.closeStream();
        this.setStatus('Reconnecting…');
        this.reconnect(0);
      },
      Math.min(5000, this.silenceMs / 3),
    );
  }

  private unpark(): void {
    if (!this.parked) return;
    this.parked = false;
    this.reconnect(0);
  }

  private reconnect(delay: number): void {
    if (this.blocked || this.restarting || this.parked) return;
    if (this.stream && this.stream.readyState === EventSource.OPEN && delay > 0) return;
    clearTimeout(this.reconnectTimer);
    const epoch = this.epoch;
    this.reconnectTimer = window.setTimeout(() => {
      this.reconnectDelay = Math.min(this.reconnectDelay * 2, 15000);
      void this.api
        .messages(this.since ?? undefined)
        .then((ms) => {
          if (epoch !== this.epoch) return;
          ms.forEach((m) => this.merge(m));
          this.render();
          this.connect();
        })
        .catch((err: unknown) => {
          if (epoch !== this.epoch) return;
          // A token the service no longer knows (401), or a visitor who must identify (403).
          if (err instanceof ApiError && (err.status === 401 || err.status === 403)) this.restart();
          else if (err instanceof ApiError && err.status === 404) this.stop(UNAVAILABLE);
          else this.reconnect(this.reconnectDelay);
        });
    }, delay);
  }

  private closeStream(): void {
    this.stream?.close();
    this.stream = null;
    clearInterval(this.watchdog);
  }

  // ---- messages ----

  /** Adds or updates a message the service has; the caller renders. */
  private merge(m: ChatMessage): void {
    const key =
      this.byId.get(m.id) ?? (m.client_id && this.items.has(m.client_id) ? m.client_id : m.id);
    this.byId.set(m.id, key);
    this.items.set(key, {
      key,
      id: m.id,
      clientId: m.client_id,
      author: m.author,
      type: m.type,
      content: m.content ?? '',
      mediaUrl: m.media_url,
      createdAt: m.created_at,
      state: 'sent',
      retryOnReconnect: false,
      error: null,
    });
    if (!this.since || m.created_at > this.since) this.since = m.created_at;
    if (m.client_id) this.forgetOutbox(m.client_id);
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
      type: 'text',
      content: text,
      mediaUrl: null,
      createdAt: new Date().toISOString(),
      state: 'pending',
      retryOnReconnect: false,
      error: null,
    };
    this.items.set(clientId, item);
    this.saveOutbox();
    this.render();
    void this.trySend(item);
  }

  /** Sends (again) a message not yet acknowledged; one attempt at a time per message. */
  private async trySend(item: Item): Promise<void> {
    if (this.sending.has(item.key) || item.id !== null || this.blocked) return;
    const epoch = this.epoch;
    this.sending.add(item.key);
    item.state = 'pending';
    item.error = null;
    this.render();
    try {
      const sent = await this.api.send(item.clientId!, item.content);
      if (epoch !== this.epoch) return;
      this.merge(sent);
    } catch (err) {
      if (epoch !== this.epoch) return;
      item.state = 'failed';
      // Refused for a reason of its own (too long, not allowed): only the visitor retries it.
      // A token the service no longer knows is not the message's fault: a new session, then it.
      const status = err instanceof ApiError ? err.status : 0;
      item.retryOnReconnect = status === 0 || status === 401 || status === 429 || status >= 500;
      item.error = item.retryOnReconnect ? null : (err as Error).message;
      this.saveOutbox();
      if (status === 401) this.restart();
    } finally {
      this.sending.delete(item.key);
    }
    this.render();
  }

  private flushOutbox(): void {
    if (this.blocked) return;
    for (const item of this.items.values())
      if (item.id === null && (item.state === 'pending' || item.retryOnReconnect))
        void this.trySend(item);
  }

  // Messages not yet acknowledged by the service survive a reload, and are sent again (with the
  // same client id: the service keeps one), unless the service refused them.
  private saveOutbox(): void {
    const unsent = [...this.items.values()].filter((i) => i.id === null);
    localStorage.setItem(
      `${this.storeKey}:outbox`,
      JSON.stringify(
        unsent.map((i) => ({
          clientId: i.clientId,
          content: i.content,
          createdAt: i.createdAt,
          error: i.error,
        })),
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
        error?: string | null;
      }[];
      for (const s of saved)
        this.items.set(s.clientId, {
          key: s.clientId,
          id: null,
          clientId: s.clientId,
          author: 'visitor',
          type: 'text',
          content: s.content,
          mediaUrl: null,
          createdAt: s.createdAt,
          state: 'failed',
          retryOnReconnect: !s.error,
          error: s.error ?? null,
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
    this.updateModal();
    this.unpark();
    this.scrollDown();
    (this.input.disabled ? this.closeButton : this.input).focus();
    this.markRead();
  }

  private close(): void {
    this.isOpen = false;
    this.panel.hidden = true;
    this.root.classList.remove('open');
    this.launcher.setAttribute('aria-expanded', 'false');
    this.updateModal();
    this.launcher.focus();
  }

  /** On a phone the open panel covers the page: a modal dialog that keeps the focus. */
  private updateModal(): void {
    if (this.isOpen && this.phone.matches) this.panel.setAttribute('aria-modal', 'true');
    else this.panel.removeAttribute('aria-modal');
  }

  /** Tab and Shift+Tab wrap around inside the modal panel. */
  private keepFocus(e: KeyboardEvent): void {
    const focusable = [
      ...this.panel.querySelectorAll<HTMLElement>('button, textarea, a[href], [tabindex="0"]'),
    ].filter((x) => !(x as HTMLButtonElement).disabled && x.getClientRects().length > 0);
    const first = focusable[0];
    const last = focusable[focusable.length - 1];
    const active = this.shadow.activeElement;
    const outside = !active || !this.panel.contains(active);
    if (e.shiftKey ? outside || active === first : outside || active === last) {
      e.preventDefault();
      (e.shiftKey ? last : first)?.focus();
    }
  }

  /** Puts each item's element in place: new ones added, changed ones updated, none rebuilt. */
  private render(): void {
    const items = [...this.items.values()].sort((a, b) =>
      a.createdAt === b.createdAt ? 0 : a.createdAt < b.createdAt ? -1 : 1,
    );
    const atBottom = this.logEl.scrollHeight - this.logEl.scrollTop - this.logEl.clientHeight < 40;
    for (const [key, node] of this.nodes)
      if (!this.items.has(key)) {
        node.li.remove();
        this.nodes.delete(key);
      }
    let prev: Element | null = null;
    for (const item of items) {
      const li = this.nodeOf(item);
      const at: Element | null = prev ? prev.nextElementSibling : this.list.firstElementChild;
      if (at !== li) this.list.insertBefore(li, at);
      prev = li;
    }
    if (atBottom) this.scrollDown();
  }

  private nodeOf(item: Item): HTMLLIElement {
    let node = this.nodes.get(item.key);
    if (!node) {
      const li = el('li', { role: 'listitem' });
      node = { li, meta: el('span', { class: 'meta' }), body: '', metaKey: '' };
      this.nodes.set(item.key, node);
    }
    node.li.className = `${item.author} ${item.state}`;
    const body = `${item.type} ${item.mediaUrl} ${item.content}`;
    if (node.body !== body) {
      node.body = body;
      node.li.replaceChildren(...this.bodyOf(item), node.meta);
    }
    const metaKey = `${item.state} ${item.error} ${item.createdAt}`;
    if (node.metaKey !== metaKey) {
      node.metaKey = metaKey;
      node.meta.replaceChildren(...this.metaOf(item));
    }
    return node.li;
  }

  private bodyOf(item: Item): Node[] {
    const parts: Node[] = [];
    const url = item.mediaUrl;
    if (url && (item.type === 'image' || item.type === 'document')) {
      if (!loadable(url)) {
        parts.push(el('span', { class: 'attachment' }, 'Attachment'));
      } else if (item.type === 'image') {
        const img = el('img', { src: url, alt: item.content || 'Image', loading: 'lazy' });
        img.onerror = () => img.replaceWith(el('span', { class: 'attachment' }, 'Attachment'));
        parts.push(img);
      } else {
        const name = decodeURIComponent(url.split(/[?#]/)[0]!.split('/').pop() ?? '') || 'file';
        parts.push(
          el(
            'a',
            { href: url, download: '', target: '_blank', rel: 'noopener noreferrer' },
            `Download ${name}`,
          ),
        );
      }
    }
    if (item.content) parts.push(el('span', { class: 'text' }, item.content));
    return parts;
  }

  private metaOf(item: Item): (Node | string)[] {
    if (item.state === 'pending') return ['Sending…'];
    if (item.state === 'failed') {
      const words = item.content.split(/\s+/).slice(0, 5).join(' ');
      const retry = el(
        'button',
        { class: 'retry', type: 'button', 'aria-label': `Retry sending: ${words}` },
        'Retry',
      );
      retry.addEventListener('click', () => {
        const current = this.items.get(item.key);
        if (current) void this.trySend(current);
      });
      return [item.error ? `Not sent: ${item.error}` : 'Not sent.', retry];
    }
    const who = item.author === 'team' ? 'Team' : 'You';
    return [`${who} · `, el('time', { datetime: item.createdAt }, timeOf(item.createdAt))];
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
  // For the tests only: a shorter silence before the stream is replaced.
  const silence = Number(script.dataset.silenceMs) || undefined;
  const start = () => {
    window.Switchboard = new Widget(base, key, silence).public;
  };
  if (document.body) start();
  else document.addEventListener('DOMContentLoaded', start);
}

boot();
