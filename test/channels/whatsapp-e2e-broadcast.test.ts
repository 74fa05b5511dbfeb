import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SEND_RETRY_DELAYS_MS } from '../../src/messages/send-pipeline.js';
import { freezeClock, messagesOf, recipientsOf } from '../broadcasts/broadcast-helpers.js';
import { META_ERRORS, type RecordedGraphRequest } from '../fake-graph/server.js';
import { statusWebhook, templateStatusWebhook, waStatus } from '../fake-graph/webhooks.js';
import {
  approvedTemplate,
  business,
  connectedAccount,
  contactWrites,
  deliver,
  drain,
  events,
  jobsOf,
  startE2E,
  whatsappBody,
  type Connected,
  type E2E,
} from './whatsapp-e2e-helpers.js';
import { randomPhone } from '../helpers.js';

const RECIPIENTS = 7;

let e: E2E;
beforeAll(async () => {
  // Small batches, so that a broadcast takes several (each one transaction, then its sends).
  e = await startE2E({ broadcastBatchSize: 3 });
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

async function audience(c: Connected, tag: string, n: number) {
  const contacts: { id: string; phone: string }[] = [];
  for (let i = 0; i < n; i++) {
    const res = await c.acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), tags: [tag] },
    });
    expect(res.statusCode, res.body).toBe(201);
    contacts.push(res.json());
  }
  return contacts;
}

async function broadcast(c: Connected, tag: string, template: string) {
  const res = await c.acc.call({
    method: 'POST',
    url: '/v1/broadcasts',
    payload: {
      name: 'Spring sale',
      channel: 'whatsapp',
      audience: { tags: [tag] },
      message: { type: 'template', template_name: template, template_params: ['20%'] },
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string }>();
}

async function getBroadcast(c: Connected, id: string) {
  const res = await c.acc.call({ method: 'GET', url: `/v1/broadcasts/${id}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const toOf = (r: RecordedGraphRequest) => (r.json as { to: string }).to;

describe('a template broadcast on a WhatsApp connection', () => {
  it('every recipient is sent exactly one request with the template, and counted sent', async () => {
    const c = await connectedAccount(e);
    const tpl = await approvedTemplate(e, c, 'Our spring sale: {{1}} off everything');
    const contacts = await audience(c, 'spring', RECIPIENTS);
    const b = await broadcast(c, 'spring', tpl.name);
    await drain(e, c.acc.accountId);

    const reqs = e.graph.find(c.sendMatcher);
    expect(reqs.map(toOf).sort()).toEqual(contacts.map((x) => x.phone.slice(1)).sort());
    for (const r of reqs) {
      expect(r.headers.authorization).toBe(`Bearer ${c.accessToken}`);
      expect(r.body.toString('utf8')).toBe(
        whatsappBody(toOf(r), 'template', {
          name: tpl.name,
          language: { code: 'en_US' },
          components: [{ type: 'body', parameters: [{ type: 'text', text: '20%' }] }],
        }),
      );
    }
    const done = await getBroadcast(c, b.id);
    expect(done).toMatchObject({
      status: 'sent',
      stats: { sent: RECIPIENTS, delivered: 0, read: 0, replied: 0, failed: 0 },
      failure_reason: null,
    });
    const messages = await messagesOf(e.t.db, c.acc.accountId, b.id);
    expect(messages).toHaveLength(RECIPIENTS);
    expect(messages.every((m) => m.status === 'sent' && m.channel === 'whatsapp')).toBe(true);
    expect(messages[0]!.content).toBe('Our spring sale: 20% off everything');
    const ids = await e.t.db
      .selectFrom('messages')
      .select('provider_message_id')
      .where('account_id', '=', c.acc.accountId)
      .where('broadcast_id', '=', b.id)
      .execute();
    expect(new Set(ids.map((r) => r.provider_message_id)).size).toBe(RECIPIENTS);
    expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
    expect(await events(e, c.acc.accountId, 'broadcast.completed')).toHaveLength(1);

    // Meta's reports on the broadcast's messages, and a reply, reach its stats.
    const first = await e.t.db
      .selectFrom('messages')
      .select('provider_message_id')
      .where('account_id', '=', c.acc.accountId)
      .where('broadcast_id', '=', b.id)
      .orderBy('id')
      .execute();
    const to = contacts[0]!.phone.slice(1);
    await deliver(
      c,
      statusWebhook(
        business(c),
        waStatus.delivered(first[0]!.provider_message_id!, to),
        waStatus.read(first[1]!.provider_message_id!, to),
      ),
    );
    await contactWrites(e, c, contacts[2]!, 'yes please');
    await drain(e, c.acc.accountId);
    expect((await getBroadcast(c, b.id)).stats).toEqual({
      sent: RECIPIENTS,
      delivered: 2,
      read: 1,
      replied: 1,
      failed: 0,
    });
  });

  it('a recipient Meta refuses for good is counted failed; one throttled is sent on retry', async () => {
    const c = await connectedAccount(e);
    const tpl = await approvedTemplate(e, c, 'Our spring sale: {{1}} off everything');
    const contacts = await audience(c, 'mixed', RECIPIENTS);
    const [refused, throttled] = [contacts[1]!, contacts[5]!];
    e.graph.failNext((r) => toOf(r) === refused.phone.slice(1), 1, META_ERRORS.undeliverable);
    e.graph.failNext((r) => toOf(r) === throttled.phone.slice(1), 1, META_ERRORS.pairRateLimit);
    const restore = freezeClock(e.t.clock);
    try {
      const b = await broadcast(c, 'mixed', tpl.name);
      await drain(e, c.acc.accountId);

      // Every recipient is queued, but one message waits for its retry: still sending, and
      // not announced as completed.
      expect(await getBroadcast(c, b.id)).toMatchObject({
        status: 'sending',
        stats: { sent: RECIPIENTS - 2, failed: 1 },
      });
      expect(await events(e, c.acc.accountId, 'broadcast.completed')).toHaveLength(0);
      const sendsTo = (x: { phone: string }) =>
        e.graph.find(c.sendMatcher).filter((r) => toOf(r) === x.phone.slice(1)).length;
      // The throttled one waits for its retry: on the schedule, not before.
      e.t.clock.advance(SEND_RETRY_DELAYS_MS[0]! - 1);
      await drain(e, c.acc.accountId);
      expect(sendsTo(throttled)).toBe(1);
      expect((await getBroadcast(c, b.id)).status).toBe('sending');
      e.t.clock.advance(1);
      await drain(e, c.acc.accountId);
      expect(sendsTo(throttled)).toBe(2);
      // The broadcast sees its last message taken at its next look, and ends then.
      e.t.clock.advance(60_000);
      await drain(e, c.acc.accountId);
      expect(await events(e, c.acc.accountId, 'broadcast.completed')).toHaveLength(1);

      const counts = new Map<string, number>();
      for (const r of e.graph.find(c.sendMatcher))
        counts.set(toOf(r), (counts.get(toOf(r)) ?? 0) + 1);
      expect(Object.fromEntries(counts)).toEqual(
        Object.fromEntries(contacts.map((x) => [x.phone.slice(1), x.id === throttled.id ? 2 : 1])),
      );
      expect(await getBroadcast(c, b.id)).toMatchObject({
        status: 'sent',
        stats: { sent: RECIPIENTS - 1, delivered: 0, read: 0, failed: 1 },
      });
      const messages = await messagesOf(e.t.db, c.acc.accountId, b.id);
      expect(messages).toHaveLength(RECIPIENTS);
      expect(messages.find((m) => m.contact_id === refused.id)!.status).toBe('failed');
      expect(messages.filter((m) => m.status === 'sent')).toHaveLength(RECIPIENTS - 1);
      const rows = await e.t.db
        .selectFrom('messages')
        .select(['id', 'failure_reason'])
        .where('account_id', '=', c.acc.accountId)
        .where('broadcast_id', '=', b.id)
        .where('status', '=', 'failed')
        .execute();
      expect(rows.map((r) => r.failure_reason)).toEqual(['(#131026) Message undeliverable']);
      expect((await events(e, c.acc.accountId, 'message.failed')).map((x) => x.data)).toEqual([
        expect.objectContaining({ id: rows[0]!.id, status: 'failed' }),
      ]);
      const recipients = await recipientsOf(e.t.db, c.acc.accountId, b.id);
      expect(recipients).toHaveLength(RECIPIENTS);
      expect(recipients.every((r) => r.message_id !== null)).toBe(true);
      expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
    } finally {
      restore();
    }
  });

  it('a batch is queued for its connection: disconnected before its retry, its messages fail and are not sent through the sandbox', async () => {
    const c = await connectedAccount(e);
    const tpl = await approvedTemplate(e, c, 'Back in stock: {{1}}');
    const contacts = await audience(c, 'disconnected', 3);
    e.graph.failNext(c.sendMatcher, 10_000, META_ERRORS.pairRateLimit);
    const restore = freezeClock(e.t.clock);
    try {
      const b = await broadcast(c, 'disconnected', tpl.name);
      // The batch recorded, not yet handed over (a crash here leaves it to a runner): its send
      // job already names the connection.
      const step = await e.t.services.broadcasts.queueNextBatch(c.acc.accountId, b.id, true);
      expect(typeof step === 'object' && 'dispatch' in step).toBe(true);
      const [queued] = await jobsOf(e, c.acc.accountId, 'message.send');
      expect((queued!.payload as { connection_id?: string }).connection_id).toBe(c.connection.id);
      if (typeof step === 'object' && 'dispatch' in step) await step.dispatch();
      await drain(e, c.acc.accountId);
      const del = await c.acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' });
      expect(del.statusCode, del.body).toBe(200);
      for (let i = 0; i < 3; i++) {
        e.t.clock.advance(60_000);
        await drain(e, c.acc.accountId);
      }
      const messages = await messagesOf(e.t.db, c.acc.accountId, b.id);
      expect(messages.map((m) => m.status)).toEqual(contacts.map(() => 'failed'));
      const reasons = await e.t.db
        .selectFrom('messages')
        .select('failure_reason')
        .where('account_id', '=', c.acc.accountId)
        .where('broadcast_id', '=', b.id)
        .execute();
      for (const r of reasons) expect(r.failure_reason).toMatch(/disconnected/);
      expect(await getBroadcast(c, b.id)).toMatchObject({
        status: 'failed',
        stats: { sent: 0, failed: contacts.length },
      });
      // Graph was tried once per recipient, before the disconnect; nothing after it.
      expect(e.graph.find(c.sendMatcher)).toHaveLength(contacts.length);
    } finally {
      restore();
    }
  });

  it('while it waits for a throttled message, its template being rejected since does not end it failed: the message holds its text', async () => {
    const c = await connectedAccount(e);
    const tpl = await approvedTemplate(e, c, 'Final hours: {{1}}');
    const contacts = await audience(c, 'rejected-later', 3);
    const throttled = contacts[1]!;
    e.graph.failNext((r) => toOf(r) === throttled.phone.slice(1), 1, META_ERRORS.pairRateLimit);
    const restore = freezeClock(e.t.clock);
    try {
      const b = await broadcast(c, 'rejected-later', tpl.name);
      await drain(e, c.acc.accountId);
      expect((await getBroadcast(c, b.id)).status).toBe('sending');
      // Meta rejects the template (paused, say) while the retry waits.
      const { provider_template_id: templateId } = await e.t.db
        .selectFrom('templates')
        .select('provider_template_id')
        .where('account_id', '=', c.acc.accountId)
        .where('name', '=', tpl.name)
        .executeTakeFirstOrThrow();
      await deliver(
        c,
        templateStatusWebhook(c.businessAccountId, {
          templateId: templateId!,
          name: tpl.name,
          event: 'REJECTED',
        }),
      );
      for (let i = 0; i < 3; i++) {
        e.t.clock.advance(SEND_RETRY_DELAYS_MS[0]!);
        await drain(e, c.acc.accountId);
      }
      expect(await getBroadcast(c, b.id)).toMatchObject({
        status: 'sent',
        failure_reason: null,
        stats: { sent: contacts.length, failed: 0 },
      });
      expect(await events(e, c.acc.accountId, 'broadcast.completed')).toHaveLength(1);
    } finally {
      restore();
    }
  });

  it('replied counts a reply only to a message that was sent: not to one still queued', async () => {
    const c = await connectedAccount(e);
    const tpl = await approvedTemplate(e, c, 'New arrivals: {{1}}');
    const [sent, throttled] = await audience(c, 'replies', 2);
    e.graph.failNext((r) => toOf(r) === throttled!.phone.slice(1), 1, META_ERRORS.pairRateLimit);
    const restore = freezeClock(e.t.clock);
    try {
      const b = await broadcast(c, 'replies', tpl.name);
      await drain(e, c.acc.accountId);
      // Both write back while the throttled one's message still waits for its retry.
      await contactWrites(e, c, sent!, 'yes');
      await contactWrites(e, c, throttled!, 'what offer?');
      expect((await getBroadcast(c, b.id)).stats).toMatchObject({ sent: 1, replied: 1 });
      // Sent on its retry; a reply after that counts.
      e.t.clock.advance(SEND_RETRY_DELAYS_MS[0]!);
      await drain(e, c.acc.accountId);
      e.t.clock.advance(1_000);
      await contactWrites(e, c, throttled!, 'ok, yes');
      expect((await getBroadcast(c, b.id)).stats).toMatchObject({ sent: 2, replied: 2 });
    } finally {
      restore();
    }
  });

  it('a broadcast whose every message is throttled until its retries run out ends failed, announced once', async () => {
    const c = await connectedAccount(e);
    const tpl = await approvedTemplate(e, c, 'Last call: {{1}} off');
    const contacts = await audience(c, 'throttled', 4);
    e.graph.failNext(c.sendMatcher, 10_000, META_ERRORS.pairRateLimit);
    const restore = freezeClock(e.t.clock);
    try {
      const b = await broadcast(c, 'throttled', tpl.name);
      await drain(e, c.acc.accountId);
      expect(await getBroadcast(c, b.id)).toMatchObject({
        status: 'sending',
        stats: { sent: 0, failed: 0 },
      });
      // A day of retries (each drain runs the one that is due), an hour at a time.
      for (let i = 0; i < SEND_RETRY_DELAYS_MS.length + 2; i++) {
        e.t.clock.advance(3_600_000);
        await drain(e, c.acc.accountId);
      }
      const done = await getBroadcast(c, b.id);
      expect(done).toMatchObject({
        status: 'failed',
        failure_reason: 'no recipient could be sent the message',
        stats: { sent: 0, failed: contacts.length },
      });
      expect(done.completed_at).not.toBeNull();
      const messages = await messagesOf(e.t.db, c.acc.accountId, b.id);
      expect(messages.map((m) => m.status)).toEqual(contacts.map(() => 'failed'));
      expect(await events(e, c.acc.accountId, 'broadcast.completed')).toHaveLength(1);
      expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
    } finally {
      restore();
    }
  });
});
