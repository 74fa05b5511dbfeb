import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SEND_RETRY_DELAYS_MS } from '../../src/messages/send-pipeline.js';
import { freezeClock } from '../broadcasts/broadcast-helpers.js';
import { META_ERRORS } from '../fake-graph/server.js';
import { newAccount, randomPhone } from '../helpers.js';
import {
  approvedTemplate,
  connectedAccount,
  createContact,
  drain,
  events,
  jobsOf,
  messageRow,
  startE2E,
  type E2E,
} from './whatsapp-e2e-helpers.js';

let e: E2E;
beforeAll(async () => {
  e = await startE2E({ sandboxEnabled: false });
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

describe('SANDBOX_ENABLED=false', () => {
  it('sending on an unconnected channel is a 422 that says so, with nothing stored', async () => {
    const acc = await newAccount(e.t);
    const contact = await createContact(acc);
    for (const [channel, payload] of [
      ['whatsapp', { type: 'template', template_name: 'anything' }],
      ['whatsapp', { type: 'text', content: 'hi' }],
      ['messenger', { type: 'text', content: 'hi' }],
      ['webchat', { type: 'text', content: 'hi' }],
    ] as const) {
      const res = await acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: contact.id, channel, ...payload },
      });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().error).toEqual({
        code: 'validation_error',
        message: `the ${channel} channel is not connected; connect it with PUT /v1/channels/${channel}`,
        details: [{ field: 'channel', issue: `${channel} is not connected` }],
      });
    }
    for (const table of ['messages', 'conversations', 'jobs', 'events'] as const) {
      const rows = await e.t.db
        .selectFrom(table)
        .select('account_id')
        .where('account_id', '=', acc.accountId)
        .execute();
      // contact.created is the only event: the contact was made through the API.
      expect(rows.length, table).toBe(table === 'events' ? 1 : 0);
    }
    expect(e.graph.requests).toEqual([]);
  });

  it('the sandbox routes are gone (404)', async () => {
    const acc = await newAccount(e.t);
    const contact = await createContact(acc);
    for (const [url, payload] of [
      [
        '/v1/sandbox/inbound',
        { channel: 'whatsapp', contact_id: contact.id, type: 'text', content: 'hi' },
      ],
      ['/v1/sandbox/messages/msg_x/status', { status: 'delivered' }],
      ['/v1/sandbox/templates/tpl_x/review', { status: 'approved' }],
    ] as const) {
      const res = await acc.call({ method: 'POST', url, payload });
      expect(res.statusCode, url).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    }
    const channels = await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' });
    expect(channels.json()).toMatchObject({ provider: null, status: 'not_connected' });
  });

  it('a broadcast on an unconnected channel is a 422 that says so, with nothing stored', async () => {
    const acc = await newAccount(e.t);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), tags: ['nobody'] },
    });
    expect(res.statusCode, res.body).toBe(201);
    const refused = await acc.call({
      method: 'POST',
      url: '/v1/broadcasts',
      payload: {
        name: 'Nowhere',
        channel: 'messenger',
        audience: { tags: ['nobody'] },
        message: { type: 'text', content: 'hi' },
      },
    });
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.json().error.message).toBe(
      'the messenger channel is not connected; connect it with PUT /v1/channels/messenger',
    );
    const list = await acc.call({ method: 'GET', url: '/v1/broadcasts' });
    expect(list.json()).toMatchObject({ data: [], total: 0 });
    expect(await jobsOf(e, acc.accountId)).toEqual([]);
  });

  it('a scheduled broadcast whose channel is disconnected before its time ends failed, saying why', async () => {
    const c = await connectedAccount(e);
    await createContact(c.acc);
    const tpl = await approvedTemplate(e, c, 'Hello {{1}}');
    const restore = freezeClock(e.t.clock);
    try {
      const created = await c.acc.call({
        method: 'POST',
        url: '/v1/broadcasts',
        payload: {
          name: 'Later',
          channel: 'whatsapp',
          audience: { all: true },
          message: { type: 'template', template_name: tpl.name, template_params: ['Ada'] },
          scheduled_at: new Date(e.t.clock.now().getTime() + 10 * 60_000).toISOString(),
        },
      });
      expect(created.statusCode, created.body).toBe(201);
      expect(
        (await c.acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' })).statusCode,
      ).toBe(200);
      e.t.clock.advance(11 * 60_000);
      await drain(e, c.acc.accountId);
      const b = await c.acc.call({ method: 'GET', url: `/v1/broadcasts/${created.json().id}` });
      expect(b.json()).toMatchObject({
        status: 'failed',
        failure_reason:
          'cannot send on whatsapp: the whatsapp channel is not connected; connect it with PUT /v1/channels/whatsapp',
        stats: { sent: 0, failed: 0 },
      });
      expect(e.graph.find(c.sendMatcher)).toEqual([]);
    } finally {
      restore();
    }
  });

  it('a broadcast whose channel is disconnected part-way ends failed with what it sent, and announces it', async () => {
    // Batches of one, so that the audience is part-way when the channel goes.
    const small = await startE2E({ sandboxEnabled: false, broadcastBatchSize: 1 });
    try {
      const c = await connectedAccount(small);
      for (let i = 0; i < 3; i++) await createContact(c.acc);
      const tpl = await approvedTemplate(small, c, 'Hello {{1}}');
      const created = await c.acc.call({
        method: 'POST',
        url: '/v1/broadcasts',
        payload: {
          name: 'Part-way',
          channel: 'whatsapp',
          audience: { all: true },
          message: { type: 'template', template_name: tpl.name, template_params: ['Ada'] },
        },
      });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json<{ id: string }>().id;
      const broadcasts = small.t.services.broadcasts;
      expect(await broadcasts.sendNextBatch(c.acc.accountId, id)).toBe('more');
      expect(
        (await c.acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' })).statusCode,
      ).toBe(200);
      expect(await broadcasts.sendNextBatch(c.acc.accountId, id)).toBe('done');
      const b = await c.acc.call({ method: 'GET', url: `/v1/broadcasts/${id}` });
      expect(b.json()).toMatchObject({
        status: 'failed',
        failure_reason: expect.stringMatching(/^cannot send on whatsapp: /),
        stats: { sent: 1, failed: 0 },
      });
      expect(await events(small, c.acc.accountId, 'broadcast.completed')).toHaveLength(1);
      expect(small.graph.find(c.sendMatcher)).toHaveLength(1);
    } finally {
      await small.close();
    }
  });

  it('a connected WhatsApp sends; once disconnected, what was still queued fails for good', async () => {
    const c = await connectedAccount(e);
    const contact = await createContact(c.acc);
    const tpl = await approvedTemplate(e, c, 'Hello {{1}}');
    const body = {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: tpl.name,
      template_params: ['Ada'],
    };
    const ok = await c.acc.call({ method: 'POST', url: '/v1/messages/send', payload: body });
    expect(ok.json()).toMatchObject({ status: 'sent' });

    const restore = freezeClock(e.t.clock);
    try {
      e.graph.failNext(c.sendMatcher, 1, META_ERRORS.tooManyCalls);
      const res = await c.acc.call({ method: 'POST', url: '/v1/messages/send', payload: body });
      expect(res.json()).toMatchObject({ status: 'queued' });
      const gone = await c.acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' });
      expect(gone.statusCode, gone.body).toBe(200);

      e.t.clock.advance(SEND_RETRY_DELAYS_MS[0]!);
      expect(await drain(e, c.acc.accountId)).toBe(1);
      expect(e.graph.find(c.sendMatcher)).toHaveLength(2);
      const row = await messageRow(e, c.acc.accountId, res.json().id);
      expect(row).toMatchObject({
        status: 'failed',
        failure_reason: 'the whatsapp channel was disconnected before the message could be sent',
      });
      expect((await events(e, c.acc.accountId, 'message.failed')).map((x) => x.data)).toEqual([
        expect.objectContaining({ id: row.id }),
      ]);
      expect(await jobsOf(e, c.acc.accountId)).toEqual([]);

      const refused = await c.acc.call({ method: 'POST', url: '/v1/messages/send', payload: body });
      expect(refused.statusCode).toBe(422);
    } finally {
      restore();
    }
  });
});
