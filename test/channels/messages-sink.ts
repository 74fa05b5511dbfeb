import { sql } from 'kysely';
import { BroadcastsRepository } from '../../src/broadcasts/broadcasts.repository.js';
import type { InboundSink, SinkInboundMessage } from '../../src/inbound/inbound-sink.js';
import type { Clock } from '../../src/clock.js';
import { ContactsRepository } from '../../src/contacts/contacts.repository.js';
import { toContact } from '../../src/contacts/contacts.service.js';
import { isValidE164 } from '../../src/contacts/phone.js';
import { ConversationsRepository } from '../../src/conversations/conversations.repository.js';
import type { Db } from '../../src/db/database.js';
import type { Channel } from '../../src/db/schema.js';
import type { Scope } from '../../src/db/transactor.js';
import { AppError, ValidationError } from '../../src/errors.js';
import { Outbox } from '../../src/events/outbox.js';
import { newId } from '../../src/ids.js';
import type { MessageRow } from '../../src/messages/messages.repository.js';
import { MessagesRepository } from '../../src/messages/messages.repository.js';
import { toMessage } from '../../src/messages/messages.present.js';
import type { MessagesService } from '../../src/messages/messages.service.js';
import { randomPhone } from '../helpers.js';

/**
 * The InboundSink over today's messages module, for these tests only: `receive` does what
 * MessagesService.receive does (contact, conversation, window, broadcast reply, message.received)
 * plus what the sink adds (the provider id, once; the profile name on a new contact), and
 * `applyProviderStatus` finds the message by provider id and goes through MessagesService.applyStatus.
 * The real one belongs in MessagesService.
 *
 * Channel identities (PSID, IGSID) are kept in memory here, since main's contacts have none yet:
 * a sender met by identity becomes a contact with a made-up phone (contacts still require one),
 * and `knowsIdentity` / `applyStatusUpTo` answer from that map.
 */
export class TestMessagesSink implements InboundSink {
  private readonly contacts: ContactsRepository;
  private readonly conversations: ConversationsRepository;
  private readonly messages: MessagesRepository;
  private readonly broadcasts: BroadcastsRepository;
  private readonly outbox: Outbox;
  /** `{account}|{channel}|{identity}` → contact id. */
  private readonly identities = new Map<string, string>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly service: MessagesService,
  ) {
    this.contacts = new ContactsRepository(db);
    this.conversations = new ConversationsRepository(db);
    this.messages = new MessagesRepository(db);
    this.broadcasts = new BroadcastsRepository(db);
    this.outbox = new Outbox(clock);
  }

  /** One `receive` after another (the real sink records them in one transaction). */
  async receiveMany(
    scope: Scope,
    messages: SinkInboundMessage[],
  ): Promise<Array<'recorded' | AppError>> {
    const results: Array<'recorded' | AppError> = [];
    for (const m of messages) {
      try {
        await this.receive(scope, m);
        results.push('recorded');
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        results.push(err);
      }
    }
    return results;
  }

  async receive(scope: Scope, inbound: SinkInboundMessage): Promise<'recorded' | 'duplicate'> {
    const accountId = scope.accountId;
    const from = inbound.from;
    const identityKey =
      'identity' in from ? `${accountId}|${inbound.channel}|${from.identity}` : null;
    const known = identityKey === null ? undefined : this.identities.get(identityKey);
    const phone = 'phone' in from ? from.phone : randomPhone();
    if (!isValidE164(phone))
      throw new ValidationError('phone', 'must be a valid E.164 number such as +14155550123');
    let created: string | null = null;
    try {
      const result = await this.db.transaction().execute(async (trx) => {
        const seen = await trx
          .selectFrom('messages')
          .select('id')
          .where('account_id', '=', accountId)
          .where('provider_message_id', '=', inbound.providerMessageId)
          .executeTakeFirst();
        if (seen) return 'duplicate';
        const now = this.clock.now();
        const row = {
          account_id: accountId,
          id: newId('con'),
          phone,
          name: from.name,
          email: null,
          tags: [],
          lifecycle_stage: null,
          custom_fields: {},
          created_at: now,
          updated_at: now,
        };
        let contactId = row.id;
        if (known !== undefined) {
          contactId = known;
        } else if (await this.contacts.insertIfPhoneFree(trx, row)) {
          await this.outbox.record(trx, accountId, 'contact.created', toContact(row));
          created = row.id;
        } else {
          contactId = (await this.contacts.findByPhone(trx, accountId, phone))!.id;
        }
        const conversation = (
          await this.conversations.openMany(trx, accountId, [contactId], inbound.channel, now)
        ).get(contactId)!;
        const message = {
          account_id: accountId,
          id: newId('msg'),
          conversation_id: conversation.id,
          direction: 'inbound',
          type: inbound.type,
          content: inbound.content,
          media_url: inbound.mediaUrl,
          template_name: null,
          template_language: null,
          template_params: null,
          status: 'delivered',
          failure_reason: null,
          provider_message_id: inbound.providerMessageId,
          broadcast_id: null,
          created_at: now,
          updated_at: now,
        } as MessageRow;
        await this.messages.insertMany(trx, [message]);
        await this.conversations.update(trx, accountId, conversation.id, {
          status: 'open',
          last_inbound_at: now,
          updated_at: now,
        });
        for (const broadcastId of await this.broadcasts.markReplied(
          trx,
          accountId,
          [conversation.id],
          now,
        ))
          await this.broadcasts.addStats(trx, accountId, broadcastId, { replied: 1 }, now);
        await this.outbox.record(trx, accountId, 'message.received', toMessage(message));
        return 'recorded' as const;
      });
      if (identityKey !== null && created !== null) this.identities.set(identityKey, created);
      return result;
    } catch (err) {
      // Two deliveries of one message at once: the unique index lets one through.
      if ((err as { code?: string }).code === '23505') return 'duplicate';
      throw err;
    }
  }

  /** One applyProviderStatus after another (the real sink applies them in one transaction). */
  async applyProviderStatusMany(
    scope: Scope,
    updates: Parameters<InboundSink['applyProviderStatusMany']>[1],
  ): Promise<Array<'applied' | 'unchanged' | 'unknown'>> {
    const results: Array<'applied' | 'unchanged' | 'unknown'> = [];
    for (const u of updates) results.push(await this.applyProviderStatus(scope, u));
    return results;
  }

  async applyProviderStatus(
    scope: Scope,
    update: {
      providerMessageId: string;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    },
  ): Promise<'applied' | 'unchanged' | 'unknown'> {
    const row = await this.db
      .selectFrom('messages')
      .select(['id', 'status'])
      .where('account_id', '=', scope.accountId)
      .where('provider_message_id', '=', update.providerMessageId)
      .where('direction', '=', 'outbound')
      .executeTakeFirst();
    if (!row) return 'unknown';
    const after = await this.service.applyStatus(scope, {
      messageId: row.id,
      status: update.status,
      reason: update.reason ?? undefined,
    });
    return after.status !== row.status ? 'applied' : 'unchanged';
  }

  /** Tests: this contact has this id on the channel (as if they had written there). */
  linkIdentity(accountId: string, channel: Channel, identity: string, contactId: string): void {
    this.identities.set(`${accountId}|${channel}|${identity}`, contactId);
  }

  /** The contact with this identity, if any. */
  contactOf(accountId: string, channel: Channel, identity: string): string | undefined {
    return this.identities.get(`${accountId}|${channel}|${identity}`);
  }

  async knowsIdentity(scope: Scope, who: { channel: Channel; identity: string }): Promise<boolean> {
    return this.identities.has(`${scope.accountId}|${who.channel}|${who.identity}`);
  }

  async nameIdentity(
    scope: Scope,
    who: { channel: Channel; identity: string; name: string },
  ): Promise<'named' | 'unchanged' | 'unknown'> {
    const contactId = this.identities.get(`${scope.accountId}|${who.channel}|${who.identity}`);
    if (contactId === undefined) return 'unknown';
    const named = await this.db
      .transaction()
      .execute((trx) =>
        this.contacts.nameIfUnnamed(trx, scope.accountId, contactId, who.name, this.clock.now()),
      );
    return named ? 'named' : 'unchanged';
  }

  /** As the sink's contract says, message by message (the real one does it in one transaction). */
  async applyStatusUpTo(
    scope: Scope,
    report: {
      channel: Channel;
      identity: string;
      status: 'delivered' | 'read';
      upTo: { at: Date } | { providerMessageId: string };
    },
  ): Promise<'applied' | 'unchanged' | 'unknown'> {
    const contactId = this.contactOf(scope.accountId, report.channel, report.identity);
    if (contactId === undefined) return 'unknown';
    const conversation = await this.db
      .selectFrom('conversations')
      .select('id')
      .where('account_id', '=', scope.accountId)
      .where('contact_id', '=', contactId)
      .where('channel', '=', report.channel)
      .executeTakeFirst();
    if (!conversation) return 'unknown';
    const outbound = this.db
      .selectFrom('messages')
      .where('account_id', '=', scope.accountId)
      .where('conversation_id', '=', conversation.id)
      .where('direction', '=', 'outbound');
    let bound: Date;
    if ('at' in report.upTo) bound = report.upTo.at;
    else {
      const named = await outbound
        .select('created_at')
        .where('provider_message_id', '=', report.upTo.providerMessageId)
        .executeTakeFirst();
      if (!named) return 'unknown';
      bound = named.created_at;
    }
    const before = report.status === 'read' ? ['sent', 'delivered'] : ['sent'];
    const rows = await outbound
      .select(['id', 'status'])
      .where('provider_message_id', 'is not', null)
      .where('created_at', '<=', bound)
      .where('status', 'in', before as MessageRow['status'][])
      .orderBy('created_at')
      .execute();
    for (const row of rows)
      await this.service.applyStatus(scope, { messageId: row.id, status: report.status });
    return rows.length > 0 ? 'applied' : 'unchanged';
  }
}

/** An outbound message already accepted by WhatsApp (as the send pipeline leaves it). */
export async function insertOutbound(
  db: Db,
  accountId: string,
  opts: { phone: string; providerMessageId: string; status?: MessageRow['status'] },
): Promise<string> {
  const now = new Date();
  return db.transaction().execute(async (trx) => {
    const contacts = new ContactsRepository(db);
    const contactId = newId('con');
    await contacts.insertIfPhoneFree(trx, {
      account_id: accountId,
      id: contactId,
      phone: opts.phone,
      name: null,
      email: null,
      tags: [],
      lifecycle_stage: null,
      custom_fields: {},
      created_at: now,
      updated_at: now,
    });
    const conversation = (
      await new ConversationsRepository(db).openMany(trx, accountId, [contactId], 'whatsapp', now)
    ).get(contactId)!;
    const id = newId('msg');
    await sql`
      INSERT INTO messages (account_id, id, conversation_id, direction, type, content, status,
        provider_message_id, created_at, updated_at)
      VALUES (${accountId}, ${id}, ${conversation.id}, 'outbound', 'text', 'hello',
        ${opts.status ?? 'sent'}, ${opts.providerMessageId}, ${now}, ${now})`.execute(trx);
    return id;
  });
}
