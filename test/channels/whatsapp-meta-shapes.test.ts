import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  connectedAccount,
  deliver,
  drain,
  events,
  messageRow,
  outboundRows,
  send,
  startE2E,
  type Connected,
  type E2E,
} from './whatsapp-e2e-helpers.js';
import { randomPhone } from '../helpers.js';

// Webhooks written out as whole JSON documents, field for field in the layout of Meta's
// reference pages for the `messages` webhook (incoming messages, statuses with their
// `conversation` and `pricing` objects, failed statuses with `error_data` and `href`, the
// value-level `errors` notification) and `message_template_status_update`, instead of through
// the test builders, so that a misreading shared by a builder and the parser cannot pass.
// Ids and texts are our own.

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

const envelope = (c: Connected, field: string, value: Record<string, unknown>) => ({
  object: 'whatsapp_business_account',
  entry: [{ id: c.businessAccountId, changes: [{ value, field }] }],
});
const metadata = (c: Connected) => ({
  display_phone_number: '15550104477',
  phone_number_id: c.phoneNumberId,
});

async function writesIn(c: Connected, waId: string, wamid: string, body: string, ts: number) {
  await deliver(
    c,
    envelope(c, 'messages', {
      messaging_product: 'whatsapp',
      metadata: metadata(c),
      contacts: [{ profile: { name: 'Grace Hopper' }, wa_id: waId }],
      messages: [{ from: waId, id: wamid, timestamp: String(ts), type: 'text', text: { body } }],
    }),
  );
  await drain(e, c.acc.accountId);
}

describe('WhatsApp webhooks in the layout of Meta reference', () => {
  it('an incoming text creates the contact with its profile name and the inbound message', async () => {
    const c = await connectedAccount(e);
    const phone = randomPhone();
    const waId = phone.slice(1);
    await writesIn(
      c,
      waId,
      'wamid.HBgLMTU1NTAxMDk5OTkVAgASGBQzRUIwQTk4QkMxRTZFRkQ5QjNBMQA=',
      'Is this in stock?',
      Math.floor(Date.now() / 1000),
    );
    const contacts = await c.acc.call({ method: 'GET', url: `/v1/contacts?search=${waId}` });
    expect(contacts.json().data).toEqual([
      expect.objectContaining({ phone, name: 'Grace Hopper' }),
    ]);
    const [received] = await events(e, c.acc.accountId, 'message.received');
    expect(received!.data).toMatchObject({
      direction: 'inbound',
      type: 'text',
      content: 'Is this in stock?',
    });
  });

  it('statuses with conversation and pricing move the message forward; a failed one keeps code and title', async () => {
    const c = await connectedAccount(e);
    const phone = randomPhone();
    const waId = phone.slice(1);
    const now = Math.floor(Date.now() / 1000);
    await writesIn(c, waId, 'wamid.in.1', 'hello', now);
    const contact = (await c.acc.call({ method: 'GET', url: `/v1/contacts?search=${waId}` })).json()
      .data[0];
    const first = await send(c, { contact_id: contact.id, type: 'text', content: 'Yes, blue too' });
    const second = await send(c, { contact_id: contact.id, type: 'text', content: 'And green' });
    expect(first.json().status).toBe('sent');
    const [a, b] = await outboundRows(e, c.acc.accountId);
    const status = (id: string, s: string, extra: Record<string, unknown> = {}) => ({
      id,
      status: s,
      timestamp: String(now + 5),
      recipient_id: waId,
      ...extra,
    });
    const billing = {
      conversation: {
        id: 'b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6',
        expiration_timestamp: String(now + 86_400),
        origin: { type: 'service' },
      },
      pricing: {
        billable: false,
        pricing_model: 'PMP',
        category: 'service',
        type: 'free_customer_service',
      },
    };
    await deliver(
      c,
      envelope(c, 'messages', {
        messaging_product: 'whatsapp',
        metadata: metadata(c),
        statuses: [
          status(a!.provider_message_id!, 'sent', billing),
          status(a!.provider_message_id!, 'delivered', billing),
          status(a!.provider_message_id!, 'read', { pricing: billing.pricing }),
          status(b!.provider_message_id!, 'failed', {
            errors: [
              {
                code: 131047,
                title: 'Re-engagement message',
                message: 'Re-engagement message',
                error_data: {
                  details:
                    'Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
                },
                href: '/docs/whatsapp/cloud-api/support/error-codes/',
              },
            ],
          }),
        ],
      }),
    );
    await drain(e, c.acc.accountId);
    expect(await messageRow(e, c.acc.accountId, first.json().id)).toMatchObject({ status: 'read' });
    expect(await messageRow(e, c.acc.accountId, second.json().id)).toMatchObject({
      status: 'failed',
      failure_reason: expect.stringMatching(/^\(#131047\) Re-engagement message/),
    });
    expect(
      (await events(e, c.acc.accountId, 'message.failed')).map(
        (x) => (x.data as { id: string }).id,
      ),
    ).toEqual([second.json().id]);
  });

  it('a value-level errors notification (no message, no status) is taken and changes nothing', async () => {
    const c = await connectedAccount(e);
    await deliver(
      c,
      envelope(c, 'messages', {
        messaging_product: 'whatsapp',
        metadata: metadata(c),
        errors: [
          {
            code: 130429,
            title: 'Rate limit hit',
            message: 'Rate limit hit',
            error_data: { details: 'Cloud API message throughput has been reached.' },
            href: '/docs/whatsapp/cloud-api/support/error-codes/',
          },
        ],
      }),
    );
    await drain(e, c.acc.accountId);
    const stored = await e.t.db
      .selectFrom('inbound_webhooks')
      .select('processed_at')
      .where('account_id', '=', c.acc.accountId)
      .execute();
    expect(stored).toHaveLength(1);
    expect(stored[0]!.processed_at).not.toBeNull();
    expect(await events(e, c.acc.accountId)).toEqual([]);
  });

  it('message_template_status_update: APPROVED, then REJECTED with its reason', async () => {
    const c = await connectedAccount(e);
    const name = `seasonal_${Date.now().toString(36)}`;
    const created = await c.acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: {
        name,
        language: 'en_US',
        body: 'Our {{1}} collection is here',
        category: 'marketing',
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    // The id Meta gave the template when it was submitted.
    const { provider_template_id: templateId } = await e.t.db
      .selectFrom('templates')
      .select('provider_template_id')
      .where('account_id', '=', c.acc.accountId)
      .where('id', '=', created.json().id)
      .executeTakeFirstOrThrow();
    expect(templateId).toMatch(/^\d+$/);
    const update = (event: string, reason: string) =>
      envelope(c, 'message_template_status_update', {
        event,
        message_template_id: Number(templateId),
        message_template_name: name,
        message_template_language: 'en_US',
        reason,
      });
    await deliver(c, update('APPROVED', 'NONE'));
    await drain(e, c.acc.accountId);
    const approved = await c.acc.call({ method: 'GET', url: `/v1/templates/${created.json().id}` });
    // Meta's "NONE" is no reason.
    expect(approved.json()).toMatchObject({ status: 'approved', rejection_reason: null });
    await deliver(c, update('REJECTED', 'INCORRECT_CATEGORY'));
    await drain(e, c.acc.accountId);
    const rejected = await c.acc.call({ method: 'GET', url: `/v1/templates/${created.json().id}` });
    expect(rejected.json()).toMatchObject({
      status: 'rejected',
      rejection_reason: 'INCORRECT_CATEGORY',
    });
  });
});
