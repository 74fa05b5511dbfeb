import type { Clock } from '../clock.js';
import type { Contact, UpdateContactBody } from '../contacts/contacts.schema.js';
import type { Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError, Forbidden, Unauthorized, ValidationError } from '../errors.js';
import { newId } from '../ids.js';
import type { MessageRow } from '../messages/messages.repository.js';
import type { Message } from '../messages/messages.schema.js';
import type { InboundMessage } from '../channels/channel.js';
import type { ConnectionsRepository } from '../connections/connections.repository.js';
import type { SecretBox } from '../connections/secret-box.js';
import type { WebchatWakeups } from './webchat-wakeups.js';
import {
  VISITOR_SEEN_EVERY_MS,
  type StoredVisitor,
  type VisitorRow,
  type WebchatRepository,
} from './webchat.repository.js';
import type { IdentifyBody, SendBody, Session, VisitorMessage } from './webchat.schema.js';
import {
  accountOfWidgetKey,
  readWebchatSettings,
  type WebchatSettings,
} from './webchat-settings.js';
import { identifierHashMatches, type VisitorClaim, type VisitorTokens } from './visitor-token.js';

/** An account's connected widget, as a visitor request finds it by its key. */
export interface Widget {
  accountId: string;
  settings: WebchatSettings;
  /** Opened only to check an identifier hash. */
  secrets: Buffer | null;
}

/** An authenticated visitor of a widget. */
export interface VisitorContext {
  widget: Widget;
  visitor: VisitorRow;
}

/**
 * What the webchat needs of contacts. `findOrCreateByIdentity` comes with contact identities
 * (DESIGN §4, "Contacts met on channels without phone numbers"); until then the webchat
 * answers that it cannot link visitors to contacts.
 */
export interface WebchatContacts {
  findOrCreateByIdentity?(
    trx: Tx,
    accountId: string,
    channel: Channel,
    externalId: string,
    name?: string | null,
  ): Promise<Contact>;
  renameIdentity(
    scope: Scope,
    channel: 'webchat',
    from: string,
    to: string,
  ): Promise<Contact | null>;
  foldAnonymous(
    scope: Scope,
    channel: 'webchat',
    anonymousId: string,
    intoId: string,
  ): Promise<boolean>;
  get(scope: Scope, id: string): Promise<Contact>;
  update(scope: Scope, id: string, input: UpdateContactBody): Promise<Contact>;
}

/** What the webchat needs of messages: the inbound path and the status path of every channel. */
export interface WebchatMessages {
  receive(scope: Scope, inbound: InboundMessage): Promise<Message>;
  applyStatusMany(
    scope: Scope,
    reports: { messageId: string; status: 'delivered' | 'read'; reason: null }[],
  ): Promise<unknown>;
}

/**
 * Whether a token was issued by this widget: its account, and its connection (a widget
 * disconnected and connected again has a new key, and its old tokens end with the old one).
 */
function issuedBy(claim: VisitorClaim, widget: Widget): boolean {
  return claim.accountId === widget.accountId && claim.widgetKey === widget.settings.widget_key;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The visitor side of webchat: sessions, identity, the conversation, receipts, wake-ups. */
export class WebchatService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      webchat: WebchatRepository;
      connections: ConnectionsRepository;
      contacts: WebchatContacts;
      messages: WebchatMessages;
      secretBox: SecretBox | null;
      /** Null without SECRETS_KEY; then no widget works (and none can be connected). */
      tokens: VisitorTokens | null;
      wakeups: WebchatWakeups;
      /**
       * The signed link a visitor (who has no API key) opens for a message's file of the
       * service's own (`/v1/media/{id}`); null for any other URL.
       */
      mediaLink?: (accountId: string, url: string) => string | null;
      clock: Clock;
    },
  ) {}

  get wakeups(): WebchatWakeups {
    return this.deps.wakeups;
  }

  /** The widget of a key, or a 404 for a key that names no connected widget. */
  async widget(widgetKey: string): Promise<Widget> {
    const accountId = accountOfWidgetKey(widgetKey);
    const row = accountId
      ? await this.deps.connections.findByChannel(accountId, 'webchat')
      : undefined;
    const settings = row?.provider === 'webchat' ? readWebchatSettings(row.settings) : null;
    if (!row || !settings || settings.widget_key !== widgetKey)
      throw new AppError('not_found', 'no webchat widget has this key');
    return { accountId: row.account_id, settings, secrets: row.secrets };
  }

  /**
   * Starts or resumes a visitor: a genuine token of this widget, still in date, resumes its
   * visitor (with a fresh token, good for VISITOR_TOKEN_TTL_MS from now); anything else (none,
   * forged, expired, another account's or connection's, its visitor gone) starts a new one. A resumed visitor is
   * marked seen, at most daily: retention forgets an anonymous one only once it has not been
   * seen for longer than its token lasts (see pruneIdleVisitors).
   */
  async startSession(widget: Widget, token: string | undefined): Promise<Session> {
    const tokens = this.requireTokens();
    const now = this.deps.clock.now();
    const claim = token ? tokens.verify(token, now) : null;
    let visitor =
      claim && issuedBy(claim, widget)
        ? await this.deps.webchat.findVisitor(widget.accountId, claim.visitorId)
        : undefined;
    if (visitor && now.getTime() - visitor.updated_at.getTime() > VISITOR_SEEN_EVERY_MS) {
      await this.deps.webchat.markSeen(widget.accountId, visitor.id, now);
      visitor = { ...visitor, updated_at: now };
    }
    if (!visitor) {
      const stored = {
        account_id: widget.accountId,
        id: newId('vis'),
        identifier: null,
        vouched_by: null,
        created_at: now,
        updated_at: now,
      };
      await this.deps.webchat.insertVisitor(stored);
      visitor = { ...stored, contact_id: null };
    }
    return this.session(widget, visitor);
  }

  /** The visitor a bearer token names, on this widget's account; a 401 otherwise. */
  async authenticate(widget: Widget, token: string | undefined): Promise<VisitorContext> {
    const claim = token ? this.requireTokens().verify(token, this.deps.clock.now()) : null;
    if (!claim || !issuedBy(claim, widget))
      throw new Unauthorized('missing, invalid or expired visitor token; start a session first');
    const visitor = await this.deps.webchat.findVisitor(widget.accountId, claim.visitorId);
    if (!visitor) throw new Unauthorized('unknown visitor; start a session first');
    return { widget, visitor };
  }

  /**
   * With `identity_verification: required`, only an identified visitor may read or write.
   * Every endpoint but the session start and identify calls this.
   */
  requireIdentity(ctx: VisitorContext): void {
    if (!mayRead(ctx))
      throw new Forbidden(
        'this chat requires identity verification: call Switchboard.identify with an identifier_hash first',
      );
  }

  /**
   * Links the visitor to the contact whose webchat identity is `identifier`, once the site's
   * HMAC of it checks out; that contact's conversation is then this visitor's, on any device.
   * An anonymous visitor who has written already keeps what they wrote: identifying as someone
   * unknown so far, their contact's identity becomes the identifier; as someone known, their
   * contact is folded into that one (see ContactsService.foldAnonymous) where it can be.
   */
  async identify(ctx: VisitorContext, body: IdentifyBody): Promise<Session> {
    const secret = this.identitySecret(ctx.widget);
    if (!identifierHashMatches(secret, body.identifier, body.identifier_hash))
      throw new Forbidden('identifier_hash does not match the identifier');
    if (body.identifier.startsWith('vis_'))
      throw new ValidationError('identifier', 'must not start with vis_ (anonymous visitor ids)');
    if (body.email !== undefined && !EMAIL.test(body.email))
      throw new ValidationError('email', 'must be an email address');
    const scope = { accountId: ctx.widget.accountId };
    // The identifier first: from now on the visitor is whichever contact holds it (see
    // findVisitor), so a message from another tab meanwhile goes to that contact (made by it if
    // need be), where the fold below finds it; and should this process die half way, the
    // visitor is already who they proved to be.
    const visitor = await this.deps.webchat.setIdentity(
      scope.accountId,
      ctx.visitor.id,
      body.identifier,
      this.deps.clock.now(),
      ctx.widget.secrets!,
    );
    if (!visitor)
      throw new Forbidden(
        'the identity secret was rotated meanwhile: identify again with a hash made with the new one',
      );
    // What the visitor wrote anonymously (its contact holds the visitor id as webchat identity)
    // becomes the identified contact's: renamed when the identifier is new, else folded in. Both
    // are no-ops once done, so an identify cut short is completed by the next one.
    const contact =
      (await this.deps.contacts.renameIdentity(
        scope,
        'webchat',
        ctx.visitor.id,
        body.identifier,
      )) ??
      (await this.deps.tx.run(scope, (trx) =>
        this.findOrCreateByIdentity(trx, scope.accountId, body.identifier, body.name ?? null),
      ));
    await this.deps.contacts.foldAnonymous(scope, 'webchat', ctx.visitor.id, contact.id);
    if ((body.name && !contact.name) || (body.email && !contact.email)) {
      await this.deps.contacts.update(scope, contact.id, {
        ...(body.name && !contact.name ? { name: body.name } : {}),
        ...(body.email && !contact.email ? { email: body.email } : {}),
      });
    }
    // Its open streams, listening under its old contact or its own id (a stream woken half way
    // may have found no contact), look again and follow it to the contact's conversation.
    const keys = new Set([ctx.visitor.contact_id ?? ctx.visitor.id, ctx.visitor.id, contact.id]);
    for (const key of keys) await this.deps.wakeups.publish(scope.accountId, key);
    return this.session(ctx.widget, visitor);
  }

  /** The visitor's conversation (messages only, never notes), oldest first. */
  async messages(ctx: VisitorContext, since: Date | null): Promise<VisitorMessage[]> {
    this.requireIdentity(ctx);
    const contactId = ctx.visitor.contact_id;
    if (!contactId) return [];
    const conversationId = await this.deps.webchat.conversationOf(ctx.widget.accountId, contactId);
    if (!conversationId) return [];
    const rows = await this.deps.webchat.messages(ctx.widget.accountId, conversationId, since);
    return this.shown(ctx, rows);
  }

  /**
   * A page of the visitor's conversation after `after` in (created_at, id) order, oldest first,
   * and where the next page starts (null when this one was the last).
   */
  async messagePage(
    ctx: VisitorContext,
    after: { at: Date; id: string },
    limit: number,
  ): Promise<{ messages: VisitorMessage[]; next: { at: Date; id: string } | null }> {
    this.requireIdentity(ctx);
    const contactId = ctx.visitor.contact_id;
    if (!contactId) return { messages: [], next: null };
    const conversationId = await this.deps.webchat.conversationOf(ctx.widget.accountId, contactId);
    if (!conversationId) return { messages: [], next: null };
    const rows = await this.deps.webchat.messagesAfter(
      ctx.widget.accountId,
      conversationId,
      after,
      limit,
    );
    const last = rows.at(-1);
    return {
      messages: this.shown(ctx, rows),
      next: last && rows.length === limit ? { at: last.created_at, id: last.id } : null,
    };
  }

  /**
   * A visitor's message: an inbound webchat message (`message.received`), the first of an
   * anonymous visitor making its contact. `client_id` makes a retry return the first.
   */
  async send(ctx: VisitorContext, body: SendBody): Promise<VisitorMessage> {
    this.requireIdentity(ctx);
    // Before anything is made: a blank first message must not create the visitor's contact.
    if (body.content.trim() === '') throw new ValidationError('content', 'must not be blank');
    const scope = { accountId: ctx.widget.accountId };
    let contactId = ctx.visitor.contact_id;
    if (!contactId) {
      // The visitor's contact, made by its first message (or again, after it was deleted): its
      // webchat identity is the verified identifier, or the visitor id while it is anonymous.
      const contact = await this.deps.tx.run(scope, (trx) =>
        this.findOrCreateByIdentity(
          trx,
          scope.accountId,
          ctx.visitor.identifier ?? ctx.visitor.id,
          null,
        ),
      );
      contactId = contact.id;
      // Its open streams listened under the visitor id until now.
      await this.deps.wakeups.publish(scope.accountId, ctx.visitor.id);
    }
    const message = await this.deps.messages.receive(scope, {
      channel: 'webchat',
      from: { contactId },
      type: 'text',
      content: body.content,
      mediaUrl: null,
      providerMessageId: providerIdOf(ctx.visitor.id, body.client_id),
    });
    // The visitor's other tabs and devices show it too.
    await this.deps.wakeups.publish(scope.accountId, contactId);
    return {
      id: message.id,
      client_id: body.client_id,
      author: 'visitor',
      type: message.type,
      content: message.content,
      media_url: message.media_url,
      created_at: message.created_at,
    };
  }

  /**
   * The widget has the team's messages (`delivered`) or the visitor has seen them (`read`):
   * each moves forward once, with its event, all in one transaction. Ids outside the visitor's
   * conversation are ignored.
   */
  async receipts(
    ctx: VisitorContext,
    status: 'delivered' | 'read',
    ids: string[],
  ): Promise<{ success: true }> {
    this.requireIdentity(ctx);
    const contactId = ctx.visitor.contact_id;
    const conversationId = contactId
      ? await this.deps.webchat.conversationOf(ctx.widget.accountId, contactId)
      : undefined;
    if (!conversationId) return { success: true };
    const mine = await this.deps.webchat.outboundIn(ctx.widget.accountId, conversationId, [
      ...new Set(ids),
    ]);
    await this.deps.messages.applyStatusMany(
      { accountId: ctx.widget.accountId },
      mine.map((messageId) => ({ messageId, status, reason: null })),
    );
    return { success: true };
  }

  /**
   * An open stream's visitor and widget as they now stand (its contact may have been made or
   * merged, the account may have changed the connection since the stream opened), or why the
   * stream must end: `gone` when its key names no connected widget any more (webchat deleted,
   * perhaps connected again under a new key); `forbidden` when its origin is no longer allowed;
   * `identify` when the visitor may no longer read (verification now required of an anonymous
   * visitor), is no longer who the stream was opened as (a rotated secret made them anonymous
   * again, or they identified as someone else), or is no more (forgotten by retention): the
   * widget then starts a session again, which gives it a new visitor if need be.
   */
  async recheck(
    ctx: VisitorContext,
    stream: { origin: string; identifier: string | null },
  ): Promise<VisitorContext | StreamEnd> {
    let widget: Widget;
    try {
      widget = await this.widget(ctx.widget.settings.widget_key);
    } catch (err) {
      if (err instanceof AppError && err.code === 'not_found') return 'gone';
      throw err;
    }
    if (!widget.settings.allowed_origins.includes(stream.origin)) return 'forbidden';
    const visitor = await this.deps.webchat.findVisitor(widget.accountId, ctx.visitor.id);
    if (!visitor) return 'identify';
    if (stream.identifier !== null && visitor.identifier !== stream.identifier) return 'identify';
    const now = { widget, visitor };
    return mayRead(now) ? now : 'identify';
  }

  private session(widget: Widget, visitor: StoredVisitor): Session {
    const s = widget.settings;
    return {
      token: this.requireTokens().sign(
        { accountId: widget.accountId, visitorId: visitor.id, widgetKey: s.widget_key },
        this.deps.clock.now(),
      ),
      visitor: { id: visitor.id, identified: visitor.identifier !== null },
      widget: {
        title: s.title,
        greeting: s.greeting,
        color: s.color,
        identity_verification: s.identity_verification,
      },
    };
  }

  /** What the visitor sees of these rows: not the team's messages that failed. */
  private shown(ctx: VisitorContext, rows: MessageRow[]): VisitorMessage[] {
    return rows
      .filter((r) => r.direction === 'inbound' || r.status !== 'failed')
      .map((r) => this.present(ctx, r));
  }

  private present(ctx: VisitorContext, row: MessageRow): VisitorMessage {
    const prefix = `webchat:${ctx.visitor.id}:`;
    const mine = row.provider_message_id?.startsWith(prefix) ?? false;
    return {
      id: row.id,
      client_id: mine ? row.provider_message_id!.slice(prefix.length) : null,
      author: row.direction === 'inbound' ? 'visitor' : 'team',
      type: row.type,
      content: row.content,
      media_url:
        row.media_url && (this.deps.mediaLink?.(row.account_id, row.media_url) ?? row.media_url),
      created_at: row.created_at.toISOString(),
    };
  }

  private async findOrCreateByIdentity(
    trx: Tx,
    accountId: string,
    externalId: string,
    name: string | null,
  ): Promise<Contact> {
    const contacts = this.deps.contacts;
    if (!contacts.findOrCreateByIdentity)
      throw new AppError(
        'internal_error',
        'webchat needs contact identities, which this build does not have',
        500,
      );
    return contacts.findOrCreateByIdentity(trx, accountId, 'webchat', externalId, name);
  }

  private identitySecret(widget: Widget): string {
    try {
      const secret = widget.secrets && this.deps.secretBox?.open(widget.secrets).identity_secret;
      if (secret) return secret;
    } catch {
      // below
    }
    throw new Forbidden('identity verification is not available on this widget');
  }

  private requireTokens(): VisitorTokens {
    if (!this.deps.tokens)
      throw new AppError('not_found', 'webchat is not available without SECRETS_KEY');
    return this.deps.tokens;
  }
}

/** Why the service ends an open stream (see WebchatService.recheck). */
export type StreamEnd = 'gone' | 'forbidden' | 'identify';

/** Whether the widget's identity verification lets this visitor read and write. */
function mayRead(ctx: VisitorContext): boolean {
  return (
    ctx.widget.settings.identity_verification !== 'required' || ctx.visitor.identifier !== null
  );
}

/** A visitor's message id towards `receive`: one per visitor and client id. */
function providerIdOf(visitorId: string, clientId: string): string {
  return `webchat:${visitorId}:${clientId}`;
}
