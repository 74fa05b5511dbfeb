import type { ChannelProviders, InboundMessage, StatusUpdate } from '../channels/channel.js';
import { WINDOWED_CHANNELS } from '../channels/channel.js';
import type { Clock } from '../clock.js';
import type { ContactsService } from '../contacts/contacts.service.js';
import type { Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError, NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import { newId } from '../ids.js';
import type { ConversationsRepository } from '../conversations/conversations.repository.js';
import type { TemplatesService } from '../templates/templates.service.js';
import type { FetchedMedia, MediaFetcher } from './media.js';
import type { MessageRow, MessagesRepository } from './messages.repository.js';
import { toMessage } from './messages.present.js';
import type { Message, SendMessageBody } from './messages.schema.js';

export const CUSTOMER_WINDOW_MS = 24 * 60 * 60 * 1000;

/** What may accompany each message type: a field outside its type is a mistake worth reporting. */
function checkFields(body: SendMessageBody): void {
  const require = (field: keyof SendMessageBody) => {
    if (body[field] === undefined) throw new ValidationError(field, `is required when type is ${body.type}`);
  };
  const forbid = (field: keyof SendMessageBody) => {
    if (body[field] !== undefined) throw new ValidationError(field, `is not allowed when type is ${body.type}`);
  };
  switch (body.type) {
    case 'text':
      require('content');
      forbid('template_name');
      forbid('template_params');
      forbid('media_url');
      break;
    case 'template':
      require('template_name');
      forbid('content');
      forbid('media_url');
      break;
    case 'image':
    case 'document':
      require('media_url');
      forbid('template_name');
      forbid('template_params');
      break;
  }
}

/** Sending, receiving and delivery status of messages. */
export class MessagesService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      messages: MessagesRepository;
      conversations: ConversationsRepository;
      contacts: ContactsService;
      templates: TemplatesService;
      providers: ChannelProviders;
      outbox: Outbox;
      fetchMedia: MediaFetcher;
      clock: Clock;
    },
  ) {}

  async send(scope: Scope, body: SendMessageBody): Promise<Message> {
    checkFields(body);
    const contact = await this.deps.contacts.get(scope, body.contact_id);
    let media: FetchedMedia | null = null;
    if (body.type === 'image' || body.type === 'document') {
      // Fetched before the transaction: a slow media host must not hold a database lock.
      media = await this.deps.fetchMedia(body.media_url!, body.type);
    }
    return this.deps.tx.run(scope, async (trx) => {
      const row = await this.sendInTransaction(trx, scope.accountId, {
        contactId: contact.id,
        phone: contact.phone,
        channel: body.channel,
        type: body.type,
        content: body.content ?? null,
        templateName: body.template_name ?? null,
        templateParams: body.template_params ?? [],
        media,
      });
      return toMessage(row);
    });
  }

  /**
   * The send path shared by the API and broadcasts: the conversation is found or created and
   * locked, the 24-hour window checked, the template rendered, the provider called, and the
   * message stored, all in the caller's transaction.
   */
  async sendInTransaction(
    trx: Tx,
    accountId: string,
    m: {
      contactId: string;
      phone: string;
      channel: Channel;
      type: SendMessageBody['type'];
      content: string | null;
      templateName: string | null;
      templateParams: string[];
      media: FetchedMedia | null;
      fields?: { name: string; params: string };
    },
  ): Promise<MessageRow> {
    const now = this.deps.clock.now();
    const conversation = await this.deps.conversations.lockOrCreate(trx, accountId, m.contactId, m.channel, now);
    if (m.type !== 'template' && WINDOWED_CHANNELS.has(m.channel)) {
      const last = conversation.last_inbound_at;
      if (!last || now.getTime() - last.getTime() >= CUSTOMER_WINDOW_MS) {
        throw new AppError(
          'validation_error',
          `outside the 24-hour customer service window on ${m.channel}: the contact has not written in the last 24 hours; send an approved template instead`,
          422,
          [{ field: 'type', issue: 'a template is required outside the 24-hour window' }],
        );
      }
    }
    const content =
      m.type === 'template'
        ? await this.deps.templates.renderApproved(trx, accountId, m.templateName!, m.templateParams, m.fields)
        : m.content;
    const id = newId('msg');
    const { providerMessageId } = await this.deps.providers[m.channel].send(
      { trx },
      {
        accountId,
        messageId: id,
        channel: m.channel,
        to: { contactId: m.contactId, phone: m.phone },
        type: m.type,
        content,
        media: m.media,
      },
    );
    const row: MessageRow = {
      account_id: accountId,
      id,
      conversation_id: conversation.id,
      direction: 'outbound',
      type: m.type,
      content,
      media_url: m.media?.url ?? null,
      template_name: m.templateName,
      status: 'sent',
      failure_reason: null,
      provider_message_id: providerMessageId,
      created_at: now,
      updated_at: now,
    };
    await this.deps.messages.insert(trx, row);
    // Replying reopens a resolved conversation and counts as activity.
    await this.deps.conversations.update(trx, accountId, conversation.id, { status: 'open', updated_at: now });
    return row;
  }

  /** An inbound message: contact and conversation found or created, the window opened, the event recorded. */
  async receive(scope: Scope, inbound: InboundMessage): Promise<Message> {
    if (inbound.type === 'text' && inbound.content === null) throw new ValidationError('content', 'is required when type is text');
    if (inbound.type !== 'text' && inbound.mediaUrl === null) throw new ValidationError('media_url', `is required when type is ${inbound.type}`);
    return this.deps.tx.run(scope, async (trx) => {
      const contact =
        'contactId' in inbound.from
          ? await this.deps.contacts.getInTransaction(trx, scope.accountId, inbound.from.contactId)
          : await this.deps.contacts.findOrCreateByPhone(trx, scope.accountId, inbound.from.phone);
      const now = this.deps.clock.now();
      const conversation = await this.deps.conversations.lockOrCreate(trx, scope.accountId, contact.id, inbound.channel, now);
      const row: MessageRow = {
        account_id: scope.accountId,
        id: newId('msg'),
        conversation_id: conversation.id,
        direction: 'inbound',
        type: inbound.type,
        content: inbound.content,
        media_url: inbound.mediaUrl,
        template_name: null,
        status: 'delivered',
        failure_reason: null,
        provider_message_id: null,
        created_at: now,
        updated_at: now,
      };
      await this.deps.messages.insert(trx, row);
      await this.deps.conversations.update(trx, scope.accountId, conversation.id, { status: 'open', last_inbound_at: now, updated_at: now });
      const message = toMessage(row);
      await this.deps.outbox.record(trx, scope.accountId, 'message.received', message);
      return message;
    });
  }

  /**
   * A provider's delivery report. Statuses only move forward; a repeated, late or backward
   * update leaves the message as it is and emits nothing.
   */
  async applyStatus(scope: Scope, update: StatusUpdate): Promise<Message> {
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.messages.find(scope.accountId, update.messageId, trx);
      if (!current) throw new NotFound('message', update.messageId);
      if (current.direction !== 'outbound') throw new ValidationError('status', 'only outbound messages have a delivery status');
      const moved = await this.deps.messages.advanceStatus(trx, scope.accountId, update.messageId, update.status, update.reason ?? null, this.deps.clock.now());
      if (!moved) return toMessage(current);
      const message = toMessage(moved.row);
      if (update.status === 'delivered') await this.deps.outbox.record(trx, scope.accountId, 'message.delivered', message);
      if (update.status === 'read') await this.deps.outbox.record(trx, scope.accountId, 'message.read', message);
      return message;
    });
  }
}
