import { sql } from 'kysely';
import { expect } from 'vitest';
import { ContactsRepository } from '../../src/contacts/contacts.repository.js';
import { ConversationsRepository } from '../../src/conversations/conversations.repository.js';
import { newId } from '../../src/ids.js';
import type { MessageRow } from '../../src/messages/messages.repository.js';
import { randomPhone } from '../helpers.js';
import { postSignedWebhook } from '../fake-graph/webhooks.js';
import type { InboundHarness, PageConnection } from './inbound-harness.js';

/** Posts a signed webhook to the connection, expects 200, and runs the processing job. */
export async function deliverPage(
  h: InboundHarness,
  conn: PageConnection,
  payload: Record<string, unknown>,
): Promise<void> {
  const res = await postSignedWebhook(conn.webhookUrl, payload, conn.appSecret);
  expect(res.status).toBe(200);
  await h.drain(conn.accountId);
}

export async function inboundOf(h: InboundHarness, accountId: string) {
  return h.t.db
    .selectFrom('messages')
    .innerJoin('conversations', (j) =>
      j
        .onRef('conversations.id', '=', 'messages.conversation_id')
        .onRef('conversations.account_id', '=', 'messages.account_id'),
    )
    .select([
      'messages.provider_message_id',
      'messages.type',
      'messages.content',
      'messages.media_url',
      'conversations.channel',
      'conversations.contact_id',
    ])
    .where('messages.account_id', '=', accountId)
    .where('messages.direction', '=', 'inbound')
    .orderBy('messages.created_at')
    .orderBy('messages.provider_message_id')
    .execute();
}

export async function contactName(h: InboundHarness, accountId: string, contactId: string) {
  const row = await h.t.db
    .selectFrom('contacts')
    .select('name')
    .where('account_id', '=', accountId)
    .where('id', '=', contactId)
    .executeTakeFirstOrThrow();
  return row.name;
}

export async function statusOf(h: InboundHarness, accountId: string, id: string) {
  const row = await h.t.db
    .selectFrom('messages')
    .select('status')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.status;
}

/**
 * A contact known on the connection's channel by `identity` (as if they had written), with one
 * conversation there, and outbound messages already accepted by Meta at the given times.
 */
export async function pageConversation(
  h: InboundHarness,
  conn: PageConnection,
  identity: string,
  outbound: Array<{ providerMessageId: string; at: Date; status?: MessageRow['status'] }>,
): Promise<{ contactId: string; ids: string[] }> {
  const accountId = conn.accountId;
  const now = new Date();
  return h.t.db.transaction().execute(async (trx) => {
    const contactId = newId('con');
    await new ContactsRepository(h.t.db).insertIfPhoneFree(trx, {
      account_id: accountId,
      id: contactId,
      phone: randomPhone(),
      name: 'Known',
      email: null,
      tags: [],
      lifecycle_stage: null,
      custom_fields: {},
      created_at: now,
      updated_at: now,
    });
    const conversation = (
      await new ConversationsRepository(h.t.db).openMany(
        trx,
        accountId,
        [contactId],
        conn.channel,
        now,
      )
    ).get(contactId)!;
    const ids: string[] = [];
    for (const m of outbound) {
      const id = newId('msg');
      await sql`
        INSERT INTO messages (account_id, id, conversation_id, direction, type, content, status,
          provider_message_id, created_at, updated_at)
        VALUES (${accountId}, ${id}, ${conversation.id}, 'outbound', 'text', 'hello',
          ${m.status ?? 'sent'}, ${m.providerMessageId}, ${m.at}, ${m.at})`.execute(trx);
      ids.push(id);
    }
    h.testSink.linkIdentity(accountId, conn.channel, identity, contactId);
    return { contactId, ids };
  });
}

/** The profile lookups the fake Graph API received for this person. */
export function profileLookups(h: InboundHarness, personId: string) {
  return h.graph.find({ method: 'GET', resource: personId });
}
