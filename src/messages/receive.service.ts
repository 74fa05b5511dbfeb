import type { InboundMessage } from '../channels/channel.js';
import type { Clock } from '../clock.js';
import { checkPhone, type ContactsService } from '../contacts/contacts.service.js';
import type { ConversationsRepository } from '../conversations/conversations.repository.js';
import type { Channel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import { newId } from '../ids.js';
import type { MessageObserver } from './message-observer.js';
import { toMessage } from './messages.present.js';
import type { MessageRow, MessagesRepository } from './messages.repository.js';
import type { Message } from './messages.schema.js';

/** An inbound message from a sender known by phone (see ReceiveService.receiveMany). */
export type PhoneInboundMessage = InboundMessage & {
  from: { phone: string; name?: string | null };
};

/**
 * Receiving: inbound messages recorded (contact and conversation found or created, the 24-hour
 * window opened, `message.received`), one at a time or a webhook's worth together.
 */
export class ReceiveService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      messages: MessagesRepository;
      conversations: ConversationsRepository;
      contacts: ContactsService;
      observer: MessageObserver;
      outbox: Outbox;
      clock: Clock;
    },
  ) {}

  /**
   * An inbound message: contact and conversation found or created, the window opened, the
   * event recorded. A provider message id already recorded takes effect once: the message as
   * first recorded is returned and nothing else happens.
   */
  async receive(scope: Scope, inbound: InboundMessage): Promise<Message> {
    checkInbound(inbound);
    const providerId = inbound.providerMessageId ?? null;
    if (providerId !== null) {
      const seen = await this.deps.messages.findByProviderId(
        this.deps.tx.db,
        scope.accountId,
        providerId,
      );
      if (seen) return toMessage(seen);
    }
    return this.deps.tx.run(scope, async (trx) => {
      // The contact stays locked until the commit: a merge waits for this message, or this
      // message finds the contact a merge made.
      const from = inbound.from;
      const contact =
        'contactId' in from
          ? await this.deps.contacts.lockInTransaction(trx, scope.accountId, from.contactId)
          : 'identity' in from
            ? await this.deps.contacts.findOrCreateByIdentity(
                trx,
                scope.accountId,
                inbound.channel,
                from.identity,
                from.name ?? null,
              )
            : await this.deps.contacts.findOrCreateByPhone(
                trx,
                scope.accountId,
                from.phone,
                from.name ?? null,
              );
      const now = this.deps.clock.now();
      const conversations = await this.deps.conversations.openMany(
        trx,
        scope.accountId,
        [contact.id],
        inbound.channel,
        now,
      );
      const conversation = conversations.get(contact.id)!;
      const row = inboundRow(scope.accountId, conversation.id, inbound, now);
      if (!(await this.deps.messages.insertInbound(trx, row))) {
        // Recorded meanwhile by a concurrent delivery of the same webhook.
        const seen = await this.deps.messages.findByProviderId(trx, scope.accountId, providerId!);
        return toMessage(seen!);
      }
      // The window opens when the provider says the person wrote, if that is earlier (a late
      // webhook cannot extend it), and never closes earlier than a window already open.
      const opened = inbound.sentAt && inbound.sentAt < now ? inbound.sentAt : now;
      const last = conversation.last_inbound_at;
      await this.deps.conversations.update(trx, scope.accountId, conversation.id, {
        status: 'open',
        last_inbound_at: last !== null && last > opened ? last : opened,
        updated_at: now,
      });
      await this.deps.observer.inboundReceived(trx, scope.accountId, [conversation.id], now);
      const message = toMessage(row);
      await this.deps.outbox.record(trx, scope.accountId, 'message.received', message);
      return message;
    });
  }

  /**
   * Inbound messages from senders known by phone (a provider webhook's, or several webhooks'),
   * recorded as `receive` records each but together: one transaction per account and channel,
   * a few statements however many messages, in the order given. Each result is the message (as
   * first recorded, for a provider id already known) or the error that refused it (a phone that
   * is no phone); a database failure fails the whole call, and nothing of it is kept.
   */
  async receiveMany(
    scope: Scope,
    inbound: PhoneInboundMessage[],
  ): Promise<Array<Message | AppError>> {
    const results: Array<Message | AppError | undefined> = inbound.map((m) => {
      try {
        checkInbound(m);
        checkPhone(m.from.phone);
        return undefined;
      } catch (err) {
        if (err instanceof AppError) return err;
        throw err;
      }
    });
    const providerIds = inbound.flatMap((m) => (m.providerMessageId ? [m.providerMessageId] : []));
    const seen = await this.deps.messages.findByProviderIds(
      this.deps.tx.db,
      scope.accountId,
      providerIds,
    );
    const groups = new Map<Channel, number[]>();
    /** Provider id → the index of its first message in this call; later ones are duplicates. */
    const firstOf = new Map<string, number>();
    const duplicates: Array<[number, number]> = [];
    inbound.forEach((m, i) => {
      if (results[i] !== undefined) return;
      const providerId = m.providerMessageId ?? null;
      const known = providerId === null ? undefined : seen.get(providerId);
      if (known) {
        results[i] = toMessage(known);
        return;
      }
      if (providerId !== null) {
        const first = firstOf.get(providerId);
        if (first !== undefined) return void duplicates.push([i, first]);
        firstOf.set(providerId, i);
      }
      groups.set(m.channel, [...(groups.get(m.channel) ?? []), i]);
    });
    for (const [channel, indexes] of groups) {
      const recorded = await this.recordInbound(
        scope,
        channel,
        indexes.map((i) => inbound[i]!),
      );
      indexes.forEach((i, k) => (results[i] = recorded[k]));
    }
    for (const [i, first] of duplicates) results[i] = results[first];
    return results as Array<Message | AppError>;
  }

  /** receiveMany's transaction: new messages of one channel, none of them known yet. */
  private async recordInbound(
    scope: Scope,
    channel: Channel,
    inbound: PhoneInboundMessage[],
  ): Promise<Message[]> {
    const { accountId } = scope;
    const recorded = await this.deps.tx.run(scope, async (trx) => {
      // Held until the commit, as `receive` holds its contact.
      const contacts = await this.deps.contacts.findOrCreateManyByPhone(
        trx,
        accountId,
        inbound.map((m) => ({ phone: m.from.phone, name: m.from.name ?? null })),
      );
      const now = this.deps.clock.now();
      const conversations = await this.deps.conversations.openMany(
        trx,
        accountId,
        [...contacts.values()].map((c) => c.id),
        channel,
        now,
        { inbound: true, inboundAt: windowsOpened(inbound, contacts, now) },
      );
      const rows = inbound.map((m) =>
        inboundRow(accountId, conversations.get(contacts.get(m.from.phone)!.id)!.id, m, now),
      );
      const inserted = await this.deps.messages.insertInboundMany(trx, rows);
      const added = rows.filter((r) => inserted.has(r.id));
      const touched = [...new Set(added.map((r) => r.conversation_id))];
      await this.deps.observer.inboundReceived(trx, accountId, touched, now);
      const messages = rows.map(toMessage);
      await this.deps.outbox.recordMany(
        trx,
        accountId,
        messages
          .filter((m) => inserted.has(m.id))
          .map((data) => ({ type: 'message.received' as const, data })),
      );
      return { rows, inserted, messages };
    });
    // Recorded meanwhile by a concurrent delivery of the same webhook: the first one's message.
    const lost = recorded.rows.filter((r) => !recorded.inserted.has(r.id));
    const firsts = await this.deps.messages.findByProviderIds(
      this.deps.tx.db,
      accountId,
      lost.map((r) => r.provider_message_id!),
    );
    return recorded.rows.map((row, i) =>
      recorded.inserted.has(row.id)
        ? recorded.messages[i]!
        : toMessage(firsts.get(row.provider_message_id!)!),
    );
  }

  /** Whether a contact of the account already has this identity on the channel. */
  async knowsIdentity(scope: Scope, who: { channel: Channel; identity: string }): Promise<boolean> {
    return (
      (await this.deps.contacts.findByIdentity(scope, who.channel, who.identity)) !== undefined
    );
  }
}

/** What every inbound message needs: its text, or its file. */
function checkInbound(inbound: InboundMessage): void {
  if (inbound.type === 'text' && inbound.content === null)
    throw new ValidationError('content', 'is required when type is text');
  if (inbound.type !== 'text' && inbound.mediaUrl === null)
    throw new ValidationError('media_url', `is required when type is ${inbound.type}`);
}

/** The row of an inbound message, in its conversation. */
function inboundRow(
  accountId: string,
  conversationId: string,
  inbound: InboundMessage,
  now: Date,
): MessageRow {
  return {
    account_id: accountId,
    id: newId('msg'),
    conversation_id: conversationId,
    direction: 'inbound',
    type: inbound.type,
    content: inbound.content,
    media_url: inbound.mediaUrl,
    template_name: null,
    template_language: null,
    template_params: null,
    status: 'delivered',
    failure_reason: null,
    provider_message_id: inbound.providerMessageId ?? null,
    broadcast_id: null,
    author: null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * When each contact's 24-hour window opens for these messages, where that is before `now`: the
 * latest of their messages' provider times (each capped at `now`).
 */
function windowsOpened(
  inbound: PhoneInboundMessage[],
  contacts: Map<string, { id: string }>,
  now: Date,
): Map<string, Date> {
  const at = new Map<string, Date>();
  for (const m of inbound) {
    const id = contacts.get(m.from.phone)!.id;
    const sent = m.sentAt && m.sentAt < now ? m.sentAt : now;
    const before = at.get(id);
    if (!before || sent > before) at.set(id, sent);
  }
  return at;
}
