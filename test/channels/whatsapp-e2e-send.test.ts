import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SEND_LEASE_MS, SEND_RETRY_DELAYS_MS } from '../../src/messages/send-pipeline.js';
import { IN_DOUBT_REASON } from '../../src/messages/send-recorder.js';
import { freezeClock } from '../broadcasts/broadcast-helpers.js';
import { META_ERRORS } from '../fake-graph/server.js';
import { statusWebhook, templateStatusWebhook, waStatus } from '../fake-graph/webhooks.js';
import {
  approvedTemplate,
  business,
  connectedAccount,
  contactWrites,
  createContact,
  deliver,
  drain,
  events,
  jobsOf,
  messageRow,
  outboundRows,
  reconnect,
  send,
  startE2E,
  whatsappBody,
  type Connected,
  type E2E,
} from './whatsapp-e2e-helpers.js';

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

/** A connected account, and a contact who wrote on WhatsApp (the window is open). */
async function withWindow(): Promise<{ c: Connected; contact: { id: string; phone: string } }> {
  const c = await connectedAccount(e);
  const contact = await createContact(c.acc);
  await contactWrites(e, c, contact);
  return { c, contact };
}

describe('POST /v1/messages/send on a WhatsApp connection: the four types', () => {
  it('text in the window an inbound webhook opened: 201 sent, the exact bytes, the wamid kept', async () => {
    const { c, contact } = await withWindow();
    const res = await send(c, {
      contact_id: contact.id,
      type: 'text',
      content: 'Your order ships today',
    });
    expect(res.statusCode, res.body).toBe(201);
    const m = res.json();
    expect(m).toMatchObject({
      direction: 'outbound',
      type: 'text',
      status: 'sent',
      content: 'Your order ships today',
      failure_reason: null,
    });
    const [req, ...more] = e.graph.find(c.sendMatcher);
    expect(more).toEqual([]);
    expect(req!.path).toBe(`/v23.0/${c.phoneNumberId}/messages`);
    expect(req!.headers.authorization).toBe(`Bearer ${c.accessToken}`);
    expect(req!.body.toString('utf8')).toBe(
      whatsappBody(contact.phone, 'text', { body: 'Your order ships today', preview_url: false }),
    );
    // The provider's id is the one the fake answered, and nothing is left to do.
    const row = await messageRow(e, c.acc.accountId, m.id);
    expect(row.provider_message_id).toMatch(/^wamid\./);
    expect(await jobsOf(e, c.acc.accountId)).toEqual([]);

    // Meta's status reports name it by that id.
    await deliver(
      c,
      statusWebhook(business(c), waStatus.sent(row.provider_message_id!, contact.phone.slice(1))),
    );
    await deliver(
      c,
      statusWebhook(
        business(c),
        waStatus.delivered(row.provider_message_id!, contact.phone.slice(1)),
      ),
    );
    await drain(e, c.acc.accountId);
    const after = await c.acc.call({
      method: 'GET',
      url: `/v1/conversations/${m.conversation_id}`,
    });
    expect(after.statusCode, after.body).toBe(200);
    expect(after.json().messages.find((x: { id: string }) => x.id === m.id)).toMatchObject({
      status: 'delivered',
    });
    expect((await events(e, c.acc.accountId, 'message.delivered')).map((x) => x.data)).toEqual([
      expect.objectContaining({ id: m.id, status: 'delivered' }),
    ]);
  });

  it('template: Meta name and language, the parameters as body components, the rendered text kept', async () => {
    const c = await connectedAccount(e);
    const contact = await createContact(c.acc);
    const tpl = await approvedTemplate(e, c, 'Hi {{1}}, order {{2}} is ready');
    // No inbound message: templates are allowed outside the window.
    const res = await send(c, {
      contact_id: contact.id,
      type: 'template',
      template_name: tpl.name,
      template_params: ['Ada', 'A-42'],
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      type: 'template',
      status: 'sent',
      content: 'Hi Ada, order A-42 is ready',
    });
    const reqs = e.graph.find(c.sendMatcher);
    expect(reqs).toHaveLength(1);
    expect(reqs[0]!.body.toString('utf8')).toBe(
      whatsappBody(contact.phone, 'template', {
        name: tpl.name,
        language: { code: 'en_US' },
        components: [
          {
            type: 'body',
            parameters: [
              { type: 'text', text: 'Ada' },
              { type: 'text', text: 'A-42' },
            ],
          },
        ],
      }),
    );
    expect((await messageRow(e, c.acc.accountId, res.json().id)).provider_message_id).toMatch(
      /^wamid\./,
    );
  });

  it('image: the https media URL is fetched at send time, then sent as link with its caption', async () => {
    const { c, contact } = await withWindow();
    const url = e.media.url('/files/photo.png');
    const before = e.media.requests.length;
    const res = await send(c, {
      contact_id: contact.id,
      type: 'image',
      media_url: url,
      content: 'The blue one',
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ type: 'image', status: 'sent', media_url: url });
    expect(e.media.requests.slice(before).map((r) => r.url)).toEqual(['/files/photo.png']);
    const reqs = e.graph.find(c.sendMatcher);
    expect(reqs).toHaveLength(1);
    expect(reqs[0]!.body.toString('utf8')).toBe(
      whatsappBody(contact.phone, 'image', { link: url, caption: 'The blue one' }),
    );
  });

  it('document: link, caption and the file name from the URL', async () => {
    const { c, contact } = await withWindow();
    const url = e.media.url('/files/invoice%2042.pdf');
    const res = await send(c, {
      contact_id: contact.id,
      type: 'document',
      media_url: url,
      content: 'Your invoice',
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ type: 'document', status: 'sent', media_url: url });
    const reqs = e.graph.find(c.sendMatcher);
    expect(reqs).toHaveLength(1);
    expect(reqs[0]!.body.toString('utf8')).toBe(
      whatsappBody(contact.phone, 'document', {
        link: url,
        caption: 'Your invoice',
        filename: 'invoice 42.pdf',
      }),
    );
  });

  it('a media URL that cannot be fetched is a 422 with nothing stored and no call to Graph', async () => {
    const { c, contact } = await withWindow();
    const res = await send(c, {
      contact_id: contact.id,
      type: 'image',
      media_url: e.media.url('/files/missing.png'),
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error.details.map((d: { field: string }) => d.field)).toContain('media_url');
    expect(e.graph.find(c.sendMatcher)).toEqual([]);
    expect(await outboundRows(e, c.acc.accountId)).toEqual([]);
  });
});

describe('the connection behind the sends', () => {
  it('a template submitted to Meta through the API, approved by its status webhook, then sent', async () => {
    const c = await connectedAccount(e);
    const contact = await createContact(c.acc);
    const name = `welcome_${contact.id.slice(-8).toLowerCase()}`;
    const created = await c.acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: { name, body: 'Welcome, {{1}}!', language: 'en_US' },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ status: 'pending' });
    const [submitted] = e.graph.templatesOf(c.businessAccountId);
    expect(submitted).toMatchObject({ name, language: 'en_US', status: 'PENDING' });
    const body = {
      contact_id: contact.id,
      type: 'template',
      template_name: name,
      template_params: ['Ada'],
    };
    // Not approved yet: refused before anything is stored or sent.
    expect((await send(c, body)).statusCode).toBe(422);
    expect(e.graph.find(c.sendMatcher)).toEqual([]);

    await deliver(
      c,
      templateStatusWebhook(c.businessAccountId, {
        templateId: submitted!.id,
        name,
        language: 'en_US',
        event: 'APPROVED',
      }),
    );
    await drain(e, c.acc.accountId);
    const res = await send(c, body);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ status: 'sent', content: 'Welcome, Ada!' });
    expect(e.graph.find(c.sendMatcher).map((r) => r.body.toString('utf8'))).toEqual([
      whatsappBody(contact.phone, 'template', {
        name,
        language: { code: 'en_US' },
        components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ada' }] }],
      }),
    ]);
  });

  it('a send Graph refuses for the token fails, and the connection shows the refusal until reconnected', async () => {
    const { c, contact } = await withWindow();
    e.graph.failNext(c.sendMatcher, 1, META_ERRORS.expiredToken);
    const res = await send(c, { contact_id: contact.id, type: 'text', content: 'token?' });
    expect(res.statusCode, res.body).toBe(201);
    const said = '(#190) Error validating access token: Session has expired';
    expect(res.json()).toMatchObject({ status: 'failed', failure_reason: said });
    const channel = await c.acc.call({ method: 'GET', url: '/v1/channels/whatsapp' });
    expect(channel.json()).toMatchObject({
      id: c.connection.id,
      status: 'error',
      error: said,
    });
    expect(channel.body).not.toContain(c.accessToken);
    const again = await reconnect(c);
    expect(again.json()).toMatchObject({ status: 'active', error: null });
  });

  it('other final refusals leave the connection active', async () => {
    const { c, contact } = await withWindow();
    e.graph.failNext(c.sendMatcher, 1, META_ERRORS.undeliverable);
    const res = await send(c, { contact_id: contact.id, type: 'text', content: 'x' });
    expect(res.json()).toMatchObject({ status: 'failed' });
    const channel = await c.acc.call({ method: 'GET', url: '/v1/channels/whatsapp' });
    expect(channel.json()).toMatchObject({ status: 'active', error: null });
  });

  it('new credentials take effect at the next send; the old token is never used again', async () => {
    const { c, contact } = await withWindow();
    const newToken = `EAAG${contact.id.slice(-12)}rotated`;
    e.graph.addPhoneNumber({
      id: c.phoneNumberId,
      token: newToken,
      display_phone_number: '+1 555-010-4477',
      verified_name: 'E2E Shop',
      business_account_id: c.businessAccountId,
    });
    const put = await reconnect(c, { access_token: newToken });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().id).toBe(c.connection.id);
    const res = await send(c, { contact_id: contact.id, type: 'text', content: 'new token' });
    expect(res.json()).toMatchObject({ status: 'sent' });
    expect(e.graph.find(c.sendMatcher).map((r) => r.token)).toEqual([newToken]);
  });
});

describe('synchronous Graph errors', () => {
  it.each([
    [
      '131026 (undeliverable)',
      {
        ...META_ERRORS.undeliverable,
        error: {
          ...META_ERRORS.undeliverable.error,
          error_data: { messaging_product: 'whatsapp', details: 'Message Undeliverable.' },
        },
      },
      '(#131026) Message undeliverable: Message Undeliverable.',
    ],
    ['100 (invalid parameter)', META_ERRORS.invalidParameter, '(#100) Invalid parameter'],
  ])(
    'a final error %s: 201 failed with the code and text, and message.failed',
    async (_n, failure, reason) => {
      const { c, contact } = await withWindow();
      e.graph.failNext(c.sendMatcher, 1, failure);
      const res = await send(c, { contact_id: contact.id, type: 'text', content: 'hello' });
      expect(res.statusCode, res.body).toBe(201);
      const m = res.json();
      expect(m).toMatchObject({ status: 'failed', failure_reason: reason });
      expect(e.graph.find(c.sendMatcher)).toHaveLength(1);
      expect((await events(e, c.acc.accountId, 'message.failed')).map((x) => x.data)).toEqual([m]);
      // Final: no job is left to try again, and draining sends nothing more.
      expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
      e.t.clock.advance(3_600_000);
      await drain(e, c.acc.accountId);
      expect(e.graph.find(c.sendMatcher)).toHaveLength(1);
      expect((await messageRow(e, c.acc.accountId, m.id)).status).toBe('failed');
    },
  );

  it.each([
    [
      '130429 throttling with Retry-After: 7',
      { ...META_ERRORS.rateLimitHit, headers: { 'retry-after': '7' } },
      7_000,
      '(#130429) Rate limit hit',
    ],
    [
      '130429 throttling with Retry-After: 86400 (honoured up to an hour)',
      { ...META_ERRORS.rateLimitHit, headers: { 'retry-after': '86400' } },
      3_600_000,
      '(#130429) Rate limit hit',
    ],
    [
      '80007 throttling',
      META_ERRORS.rateLimitIssues,
      SEND_RETRY_DELAYS_MS[0]!,
      '(#80007) Rate limit issues',
    ],
    [
      'HTTP 500',
      META_ERRORS.somethingWentWrong,
      SEND_RETRY_DELAYS_MS[0]!,
      '(#131000) Something went wrong',
    ],
    [
      'code 2 (service unavailable)',
      META_ERRORS.apiService,
      SEND_RETRY_DELAYS_MS[0]!,
      '(#2) Service temporarily unavailable',
    ],
  ])(
    '%s: 201 queued, retried no sooner than the schedule says, then sent',
    async (_n, failure, waitMs, reason) => {
      const { c, contact } = await withWindow();
      const restore = freezeClock(e.t.clock);
      try {
        e.graph.failNext(c.sendMatcher, 1, failure);
        const res = await send(c, { contact_id: contact.id, type: 'text', content: 'retry me' });
        expect(res.statusCode, res.body).toBe(201);
        const m = res.json();
        expect(m).toMatchObject({ status: 'queued', failure_reason: null });
        expect(await events(e, c.acc.accountId, 'message.failed')).toEqual([]);
        const sentAt = new Date(m.created_at).getTime();
        const [job] = await jobsOf(e, c.acc.accountId, 'message.send');
        expect(job).toMatchObject({ locked_until: null, dead_at: null });
        expect(job!.run_at.getTime()).toBe(sentAt + waitMs);
        const stored = await e.t.db
          .selectFrom('jobs')
          .select('last_error')
          .where('account_id', '=', c.acc.accountId)
          .where('id', '=', job!.id)
          .executeTakeFirstOrThrow();
        expect(stored.last_error).toBe(reason);

        // Not a millisecond early.
        e.t.clock.advance(waitMs - 1);
        expect(await drain(e, c.acc.accountId)).toBe(0);
        expect(e.graph.find(c.sendMatcher)).toHaveLength(1);

        e.t.clock.advance(1);
        expect(await drain(e, c.acc.accountId)).toBe(1);
        const reqs = e.graph.find(c.sendMatcher);
        expect(reqs).toHaveLength(2);
        // The same request again.
        expect(reqs[1]!.body.equals(reqs[0]!.body)).toBe(true);
        const row = await messageRow(e, c.acc.accountId, m.id);
        expect(row).toMatchObject({ status: 'sent', failure_reason: null });
        expect(row.provider_message_id).toMatch(/^wamid\./);
        expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
      } finally {
        restore();
      }
    },
  );

  it('throttled for 24 hours of attempts: failed with the reason, and message.failed', async () => {
    const { c, contact } = await withWindow();
    const restore = freezeClock(e.t.clock);
    try {
      e.graph.failNext(c.sendMatcher, Number.POSITIVE_INFINITY, META_ERRORS.rateLimitIssues);
      const res = await send(c, { contact_id: contact.id, type: 'text', content: 'never' });
      expect(res.json()).toMatchObject({ status: 'queued' });
      const start = new Date(res.json().created_at).getTime();

      // Each retry falls due exactly on the schedule: 2 s, 10 s, 30 s… then hourly.
      const dueTimes: number[] = [];
      for (let i = 0; i < SEND_RETRY_DELAYS_MS.length; i++) {
        const [job] = await jobsOf(e, c.acc.accountId, 'message.send');
        expect(job, `retry ${i + 1}`).toBeDefined();
        dueTimes.push(job!.run_at.getTime() - e.t.clock.now().getTime());
        e.t.clock.advance(job!.run_at.getTime() - e.t.clock.now().getTime());
        expect(await drain(e, c.acc.accountId)).toBe(1);
      }
      expect(dueTimes).toEqual(SEND_RETRY_DELAYS_MS);
      const elapsed = e.t.clock.now().getTime() - start;
      expect(elapsed).toBeGreaterThanOrEqual(24 * 3_600_000);
      expect(elapsed).toBeLessThan(25 * 3_600_000);

      // One request per attempt: the API's own and one per retry.
      expect(e.graph.find(c.sendMatcher)).toHaveLength(SEND_RETRY_DELAYS_MS.length + 1);
      const row = await messageRow(e, c.acc.accountId, res.json().id);
      expect(row).toMatchObject({
        status: 'failed',
        failure_reason: 'not accepted by the provider within 24 hours: (#80007) Rate limit issues',
        provider_message_id: null,
      });
      expect((await events(e, c.acc.accountId, 'message.failed')).map((x) => x.data)).toEqual([
        expect.objectContaining({
          id: row.id,
          status: 'failed',
          failure_reason: row.failure_reason,
        }),
      ]);
      expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
      e.t.clock.advance(24 * 3_600_000);
      expect(await drain(e, c.acc.accountId)).toBe(0);
    } finally {
      restore();
    }
  });
});

describe('a send whose first attempt never hears back', () => {
  it('the API answers queued; when its lease ends a runner takes over: the call may have reached Graph, so the message fails in doubt and is never sent again', async () => {
    const { c, contact } = await withWindow();
    const restore = freezeClock(e.t.clock);
    try {
      e.graph.hang(c.sendMatcher, 1);
      const pending = send(c, { contact_id: contact.id, type: 'text', content: 'are you there?' });
      // The request reached Graph: the message and its job are committed, the answer is owed.
      await e.graph.waitFor(c.sendMatcher, 1);
      const [queued] = await outboundRows(e, c.acc.accountId);
      expect(queued).toMatchObject({ status: 'queued', provider_message_id: null });
      const [job] = await jobsOf(e, c.acc.accountId, 'message.send');
      expect(job!.locked_until!.getTime()).toBe(queued!.created_at.getTime() + SEND_LEASE_MS);

      // No runner takes it while the API's attempt holds it.
      e.t.clock.advance(SEND_LEASE_MS - 1);
      expect(await drain(e, c.acc.accountId)).toBe(0);
      expect(e.graph.find(c.sendMatcher)).toHaveLength(1);

      // The lease ends (the process that held it may be gone): the runner that takes the job
      // over cannot know whether Graph took the message (no idempotency key), so it fails it
      // rather than risk a duplicate.
      e.t.clock.advance(2);
      expect(await drain(e, c.acc.accountId)).toBe(1);
      expect(e.graph.find(c.sendMatcher)).toHaveLength(1);
      const failed = await messageRow(e, c.acc.accountId, queued!.id);
      expect(failed).toMatchObject({ status: 'failed', failure_reason: IN_DOUBT_REASON });

      // The first call ends at last (its connection drops): it changes nothing, and the API
      // answers what it knew, queued.
      e.graph.reset();
      const res = await pending;
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toMatchObject({ id: queued!.id, status: 'queued' });

      const rows = await outboundRows(e, c.acc.accountId);
      expect(rows.map((r) => [r.id, r.status, r.provider_message_id])).toEqual([
        [queued!.id, 'failed', null],
      ]);
      expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
      expect(await events(e, c.acc.accountId, 'message.failed')).toHaveLength(1);
    } finally {
      restore();
    }
  });
});

describe('SPEC rules on the real provider', () => {
  it('a text outside the 24-hour window is a 422, with nothing stored and no call to Graph', async () => {
    const c = await connectedAccount(e);
    const contact = await createContact(c.acc);
    const res = await send(c, { contact_id: contact.id, type: 'text', content: 'hi' });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error.message).toMatch(/24-hour/);
    expect(e.graph.find(c.sendMatcher)).toEqual([]);
    expect(await outboundRows(e, c.acc.accountId)).toEqual([]);
    expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
  });

  it('the window closes 24 hours after the last inbound message', async () => {
    const { c, contact } = await withWindow();
    const restore = freezeClock(e.t.clock);
    try {
      e.t.clock.advance(24 * 3_600_000);
      const res = await send(c, { contact_id: contact.id, type: 'text', content: 'late' });
      expect(res.statusCode, res.body).toBe(422);
      expect(e.graph.find(c.sendMatcher)).toEqual([]);
    } finally {
      restore();
    }
  });

  it('a replay with the same Idempotency-Key answers the first result and does not call Graph again', async () => {
    const { c, contact } = await withWindow();
    const headers = { 'idempotency-key': `e2e-${contact.id}` };
    const payload = { contact_id: contact.id, type: 'text', content: 'exactly once' };
    const first = await send(c, payload, headers);
    expect(first.statusCode, first.body).toBe(201);
    expect(first.json().status).toBe('sent');
    const again = await send(c, payload, headers);
    expect(again.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
    expect(e.graph.find(c.sendMatcher)).toHaveLength(1);
    expect(await outboundRows(e, c.acc.accountId)).toHaveLength(1);
  });
});
