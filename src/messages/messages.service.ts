import type { BroadcastsRepository } from '../broadcasts/broadcasts.repository.js';
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
import type { Metrics } from '../metrics/metrics.js';
import type { TemplatesService } from '../templates/templates.service.js';
import type { FetchedMedia, MediaFetcher } from './media.js';
import type { MessageRow, MessagesRepository } from './messages.repository.js';
import { toMessage } from './messages.present.js';
import type { Message, SendMessageBody } from './messages.schema.js';

export const CUSTOMER_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface SendResult {
  contactId: string;
  row?: MessageRow;
  error?: AppError;
}

function outsideWindow(channel: Channel): AppError {
  return new AppError(
    'validation_error',
    `outside the 24-hour customer service window on ${channel}: the contact has not written in the last 24 hours; send an approved template instead`,
    422,
    [{ field: 'type', issue: 'a template is required outside the 24-hour window' }],
  );
}

/** What may accompany each message type: a field outside its type is a mistake worth reporting. */
function checkFields(body: SendMessageBody): void {
  const require = (field: keyof SendMessageBody) => {
    if (body[field] === undefined)
      throw new ValidationError(field, `is required when type is ${body.type}`);
  };
  const forbid = (field: keyof SendMessageBody) => {
    if (body[field] !== undefined)
      throw new ValidationError(field, `is not allowed when type is ${body.type}`);
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
      broadcasts: BroadcastsRepository;
      outbox: Outbox;
      fetchMedia: MediaFetcher;
      metrics: Metrics;
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
      const content =
        body.type === 'template'
          ? await this.deps.templates.renderApproved(
              trx,
              scope.accountId,
              body.template_name!,
              body.template_params ?? [],
            )
          : (body.content ?? null);
      const [result] = await this.sendBatch(trx, scope.accountId, {
        channel: body.channel,
        type: body.type,
        content,
        templateName: body.template_name ?? null,
        media,
        broadcastId: null,
        recipients: [{ contactId: contact.id, phone: contact.phone }],
      });
      if (result!.error) throw result!.error;
      return toMessage(result!.row!);
    });
  }

  /**
   * The one send path, for the API (a batch of one) and for broadcasts: conversations found or
   * created and locked, the 24-hour window checked per recipient, the provider called, the
   * messages stored and their conversations reopened, all in the caller's transaction. A
   * recipient the rules refuse gets an error instead of a message; the others are unaffected.
   */
  async sendBatch(
    trx: Tx,
    accountId: string,
    batch: {
      channel: Channel;
      type: SendMessageBody['type'];
      /** The text, or a template's rendered text. */
      content: string | null;
      templateName: string | null;
      media: FetchedMedia | null;
      broadcastId: string | null;
      recipients: { contactId: string; phone: string }[];
    },
  ): Promise<SendResult[]> {
    const now = this.deps.clock.now();
    // Sorted, so that concurrent batches lock conversations in one order and never deadlock.
    const contactIds = [...new Set(batch.recipients.map((r) => r.contactId))].sort();
    const windowed = batch.type !== 'template' && WINDOWED_CHANNELS.has(batch.channel);
    // Inside the window there is always a conversation (the contact wrote in it), so a windowed
    // send only locks existing ones and never leaves an empty conversation for a refused recipient.
    const conversations = windowed
      ? await this.deps.conversations.lockExisting(trx, accountId, contactIds, batch.channel)
      : await this.deps.conversations.openMany(trx, accountId, contactIds, batch.channel, now);
    const results: SendResult[] = [];
    const accepted: {
      recipient: { contactId: string; phone: string };
      conversationId: string;
      messageId: string;
    }[] = [];
    for (const recipient of batch.recipients) {
      const conversation = conversations.get(recipient.contactId);
      const last = conversation?.last_inbound_at;
      if (
        !conversation ||
        (windowed && (!last || now.getTime() - last.getTime() >= CUSTOMER_WINDOW_MS))
      ) {
        results.push({ contactId: recipient.contactId, error: outsideWindow(batch.channel) });
        continue;
      }
      const entry = { recipient, conversationId: conversation.id, messageId: newId('msg') };
      accepted.push(entry);
      results.push({ contactId: recipient.contactId });
    }
    if (accepted.length === 0) return results;

    const provider = this.deps.providers[batch.channel];
    let receipts: { providerMessageId: string }[];
    try {
      receipts = await provider.send(
        { trx },
        accepted.map((a) => ({
          accountId,
          messageId: a.messageId,
          channel: batch.channel,
          to: a.recipient,
          type: batch.type,
          content: batch.content,
          media: batch.media,
        })),
      );
    } catch (err) {
      this.deps.metrics.providerError(batch.channel, provider.name);
      throw err;
    }
    const rows: MessageRow[] = accepted.map((a, i) => ({
      account_id: accountId,
      id: a.messageId,
      conversation_id: a.conversationId,
      direction: 'outbound',
      type: batch.type,
      content: batch.content,
      media_url: batch.media?.url ?? null,
      template_name: batch.templateName,
      status: 'sent',
      failure_reason: null,
      provider_message_id: receipts[i]!.providerMessageId,
      broadcast_id: batch.broadcastId,
      created_at: now,
      updated_at: now,
    }));
    await this.deps.messages.insertMany(trx, rows);
    // Sending is activity and reopens a resolved conversation (openMany did so already).
    if (windowed)
      await this.deps.conversations.touchOpen(
        trx,
        accountId,
        [...new Set(accepted.map((a) => a.conversationId))],
        now,
      );
    const byContact = new Map(rows.map((r, i) => [accepted[i]!.recipient.contactId, r]));
    for (const result of results) if (!result.error) result.row = byContact.get(result.contactId);
    return results;
  }

  /** An inbound message: contact and conversation found or created, the window opened, the event recorded. */
  async receive(scope: Scope, inbound: InboundMessage): Promise<Message> {
    if (inbound.type === 'text' && inbound.content === null)
      throw new ValidationError('content', 'is required when type is text');
    if (inbound.type !== 'text' && inbound.mediaUrl === null)
      throw new ValidationError('media_url', `is required when type is ${inbound.type}`);
    return this.deps.tx.run(scope, async (trx) => {
      const contact =
        'contactId' in inbound.from
          ? await this.deps.contacts.getInTransaction(trx, scope.accountId, inbound.from.contactId)
          : await this.deps.contacts.findOrCreateByPhone(trx, scope.accountId, inbound.from.phone);
      const now = this.deps.clock.now();
      const conversations = await this.deps.conversations.openMany(
        trx,
        scope.accountId,
        [contact.id],
        inbound.channel,
        now,
      );
      const conversation = conversations.get(contact.id)!;
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
        broadcast_id: null,
        created_at: now,
        updated_at: now,
      };
      await this.deps.messages.insertMany(trx, [row]);
      await this.deps.conversations.update(trx, scope.accountId, conversation.id, {
        status: 'open',
        last_inbound_at: now,
        updated_at: now,
      });
      // A reply to a broadcast counts once per contact and broadcast.
      for (const broadcastId of await this.deps.broadcasts.markReplied(
        trx,
        scope.accountId,
        conversation.id,
        now,
      )) {
        await this.deps.broadcasts.addStats(trx, scope.accountId, broadcastId, { replied: 1 }, now);
      }
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
      if (current.direction !== 'outbound')
        throw new ValidationError('status', 'only outbound messages have a delivery status');
      const now = this.deps.clock.now();
      const moved = await this.deps.messages.advanceStatus(
        trx,
        scope.accountId,
        update.messageId,
        update.status,
        update.reason ?? null,
        now,
      );
      if (!moved) return toMessage(current);
      const message = toMessage(moved.row);
      if (moved.row.broadcast_id) {
        // The funnel: a jump from sent to read counts as delivered too; each level once per message.
        await this.deps.broadcasts.addStats(
          trx,
          scope.accountId,
          moved.row.broadcast_id,
          {
            delivered:
              update.status === 'delivered' || (update.status === 'read' && moved.from === 'sent')
                ? 1
                : 0,
            read: update.status === 'read' ? 1 : 0,
            failed: update.status === 'failed' ? 1 : 0,
          },
          now,
        );
      }
      if (update.status === 'delivered')
        await this.deps.outbox.record(trx, scope.accountId, 'message.delivered', message);
      if (update.status === 'read')
        await this.deps.outbox.record(trx, scope.accountId, 'message.read', message);
      return message;
    });
  }
}
