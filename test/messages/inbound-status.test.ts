import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { JobRunner } from '../../src/jobs/job-runner.js';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import {
  createContact,
  createTemplate,
  eventsOf,
  expectError,
  expectStatus,
  freezeClock,
  receive,
  sendText,
} from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

function inbound(acc: TestAccount, payload: Record<string, unknown>) {
  return acc.call({ method: 'POST', url: '/v1/sandbox/inbound', payload });
}
function setStatus(acc: TestAccount, id: string, status: string, reason?: string) {
  return acc.call({
    method: 'POST',
    url: `/v1/sandbox/messages/${id}/status`,
    payload: reason === undefined ? { status } : { status, reason },
  });
}
async function contactsOf(acc: TestAccount) {
  return t.db
    .selectFrom('contacts')
    .select(['id', 'phone'])
    .where('account_id', '=', acc.accountId)
    .execute();
}
async function conversationsOf(app: TestApp, acc: TestAccount) {
  return app.db
    .selectFrom('conversations')
    .select(['id', 'contact_id', 'channel', 'status'])
    .where('account_id', '=', acc.accountId)
    .execute();
}

describe('POST /v1/sandbox/inbound', () => {
  it('an unknown phone creates the contact (contact.created), the conversation, and emits message.received with the message', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const res = await inbound(acc, {
      channel: 'whatsapp',
      phone,
      type: 'text',
      content: 'hi, anyone there?',
    });
    expectStatus(res, 201);
    const message = res.json();
    expect(message).toMatchObject({
      direction: 'inbound',
      type: 'text',
      content: 'hi, anyone there?',
      media_url: null,
    });
    expect(message.id).toMatch(/^msg_/);

    const contacts = await contactsOf(acc);
    expect(contacts).toEqual([{ id: expect.stringMatching(/^con_/), phone }]);
    const convs = await conversationsOf(t, acc);
    expect(convs).toEqual([
      {
        id: message.conversation_id,
        contact_id: contacts[0]!.id,
        channel: 'whatsapp',
        status: 'open',
      },
    ]);

    const events = await eventsOf(t.db, acc.accountId);
    expect(events.map((e) => e.type)).toEqual(['contact.created', 'message.received']);
    expect(events[0]!.data).toMatchObject({ id: contacts[0]!.id, phone, name: null, tags: [] });
    expect(events[1]!.data).toEqual(message);
    const contact = await acc.call({ method: 'GET', url: `/v1/contacts/${contacts[0]!.id}` });
    expect(events[0]!.data).toEqual(contact.json());
  });

  it('a known phone reuses the contact and the conversation, with no second contact.created', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const first = await inbound(acc, { channel: 'webchat', phone, type: 'text', content: 'one' });
    const second = await inbound(acc, { channel: 'webchat', phone, type: 'text', content: 'two' });
    expectStatus(second, 201);
    expect(second.json().conversation_id).toBe(first.json().conversation_id);
    expect(await contactsOf(acc)).toHaveLength(1);
    expect((await eventsOf(t.db, acc.accountId)).map((e) => e.type)).toEqual([
      'contact.created',
      'message.received',
      'message.received',
    ]);
  });

  it('10 concurrent first messages from one unknown phone make one contact, one contact.created and one conversation', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        inbound(acc, { channel: 'whatsapp', phone, type: 'text', content: `burst ${i}` }),
      ),
    );
    for (const r of results) expectStatus(r, 201);
    expect(await contactsOf(acc)).toHaveLength(1);
    const convs = await conversationsOf(t, acc);
    expect(convs).toHaveLength(1);
    expect(new Set(results.map((r) => r.json().conversation_id))).toEqual(new Set([convs[0]!.id]));
    expect(await eventsOf(t.db, acc.accountId, 'contact.created')).toHaveLength(1);
    expect(await eventsOf(t.db, acc.accountId, 'message.received')).toHaveLength(10);
  });

  it('an inbound message reopens a resolved conversation', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const first = await receive(acc, contact.id, 'instagram');
    const resolved = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${first.conversation_id}/resolve`,
    });
    expect(resolved.json().status).toBe('resolved');
    const again = await receive(acc, contact.id, 'instagram', 'me again');
    expect(again.conversation_id).toBe(first.conversation_id);
    const conv = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${first.conversation_id}`,
    });
    expect(conv.json().status).toBe('open');
  });

  it('with contact_id: the message joins that contact, and no contact is created', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const res = await inbound(acc, {
      channel: 'messenger',
      contact_id: contact.id,
      type: 'text',
      content: 'hello',
    });
    expectStatus(res, 201);
    const convs = await conversationsOf(t, acc);
    expect(convs).toEqual([
      expect.objectContaining({
        id: res.json().conversation_id,
        contact_id: contact.id,
        channel: 'messenger',
      }),
    ]);
    expect(await contactsOf(acc)).toHaveLength(1);
    const events = await eventsOf(t.db, acc.accountId);
    expect(events.map((e) => e.type)).toEqual(['contact.created', 'message.received']); // the first from POST /contacts
    expect(events[1]!.data).toEqual(res.json());
  });

  it('an image arrives with its media_url', async () => {
    const acc = await newAccount(t);
    const res = await inbound(acc, {
      channel: 'webchat',
      phone: randomPhone(),
      type: 'image',
      media_url: 'https://cdn.example.com/cat.jpg',
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({
      type: 'image',
      content: null,
      media_url: 'https://cdn.example.com/cat.jpg',
    });
  });

  it('both phone and contact_id, or neither, is a 422', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    expectError(
      await inbound(acc, {
        channel: 'webchat',
        phone: randomPhone(),
        contact_id: contact.id,
        type: 'text',
        content: 'x',
      }),
      422,
    );
    expectError(await inbound(acc, { channel: 'webchat', type: 'text', content: 'x' }), 422);
    expect(await conversationsOf(t, acc)).toEqual([]);
  });

  it('an unknown contact_id is a 404', async () => {
    const acc = await newAccount(t);
    expectError(
      await inbound(acc, {
        channel: 'webchat',
        contact_id: 'con_00000000000000000000000000',
        type: 'text',
        content: 'x',
      }),
      404,
    );
    expect(await conversationsOf(t, acc)).toEqual([]);
  });

  it('a phone that is not E.164 is a 422, and nothing is created', async () => {
    const acc = await newAccount(t);
    for (const phone of ['4155550123', '+0123456789', '+1 415 555 0123', '+12']) {
      expectError(
        await inbound(acc, { channel: 'webchat', phone, type: 'text', content: 'x' }),
        422,
      );
    }
    expect(await contactsOf(acc)).toEqual([]);
    expect(await eventsOf(t.db, acc.accountId)).toEqual([]);
  });

  it('a text without content, or an image without media_url, is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await inbound(acc, { channel: 'webchat', phone: randomPhone(), type: 'text' }),
      422,
      'content',
    );
    expectError(
      await inbound(acc, { channel: 'webchat', phone: randomPhone(), type: 'image' }),
      422,
      'media_url',
    );
    expectError(
      await inbound(acc, {
        channel: 'webchat',
        phone: randomPhone(),
        type: 'template',
        content: 'x',
      }),
      422,
      'type',
    );
    expect(await contactsOf(acc)).toEqual([]);
  });
});

describe('POST /v1/sandbox/messages/{id}/status', () => {
  let acc: TestAccount;
  let contactId: string;
  beforeAll(async () => {
    acc = await newAccount(t);
    contactId = (await createContact(acc)).id;
  });
  async function sent(): Promise<string> {
    const res = await sendText(acc, contactId);
    expectStatus(res, 201);
    expect(res.json().status).toBe('sent');
    return res.json().id as string;
  }
  /** The message's status events (its message.created, written when it was sent, aside). */
  async function eventsFor(id: string) {
    return (await eventsOf(t.db, acc.accountId)).filter(
      (e) => (e.data as { id?: string }).id === id && e.type !== 'message.created',
    );
  }

  it('sent → delivered answers the message and emits message.delivered with it', async () => {
    const id = await sent();
    const res = await setStatus(acc, id, 'delivered');
    expectStatus(res, 200);
    expect(res.json()).toMatchObject({ id, status: 'delivered', direction: 'outbound' });
    const events = await eventsFor(id);
    expect(events).toEqual([{ type: 'message.delivered', data: res.json() }]);
  });

  it('delivered → read emits message.read', async () => {
    const id = await sent();
    await setStatus(acc, id, 'delivered');
    const res = await setStatus(acc, id, 'read');
    expectStatus(res, 200);
    expect(res.json().status).toBe('read');
    const events = await eventsFor(id);
    expect(events.map((e) => e.type)).toEqual(['message.delivered', 'message.read']);
    expect(events[1]!.data).toEqual(res.json());
  });

  it('sent → read emits only message.read', async () => {
    const id = await sent();
    const res = await setStatus(acc, id, 'read');
    expect(res.json().status).toBe('read');
    expect((await eventsFor(id)).map((e) => e.type)).toEqual(['message.read']);
  });

  it('a repeated delivered answers 200 unchanged and emits nothing more', async () => {
    const id = await sent();
    const first = await setStatus(acc, id, 'delivered');
    const again = await setStatus(acc, id, 'delivered');
    expectStatus(again, 200);
    expect(again.json()).toEqual(first.json());
    expect((await eventsFor(id)).map((e) => e.type)).toEqual(['message.delivered']);
  });

  it('read → delivered answers 200 still read and emits nothing', async () => {
    const id = await sent();
    const read = await setStatus(acc, id, 'read');
    const late = await setStatus(acc, id, 'delivered');
    expectStatus(late, 200);
    expect(late.json()).toEqual(read.json());
    expect((await eventsFor(id)).map((e) => e.type)).toEqual(['message.read']);
    expect((await setStatus(acc, id, 'read')).json()).toEqual(read.json());
    expect(await eventsFor(id)).toHaveLength(1);
  });

  it('failed keeps its reason and emits message.failed once; nothing moves it afterwards (200 unchanged, no event)', async () => {
    const id = await sent();
    const failed = await setStatus(acc, id, 'failed', 'handset switched off');
    expectStatus(failed, 200);
    expect(failed.json()).toMatchObject({
      status: 'failed',
      failure_reason: 'handset switched off',
    });
    for (const status of ['delivered', 'read', 'failed']) {
      const res = await setStatus(
        acc,
        id,
        status,
        status === 'failed' ? 'another reason' : undefined,
      );
      expectStatus(res, 200);
      expect(res.json()).toEqual(failed.json());
    }
    expect((await eventsFor(id)).map((e) => e.type)).toEqual(['message.failed']);
    const conv = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${failed.json().conversation_id}`,
    });
    expect(conv.json().messages.find((m: { id: string }) => m.id === id)).toEqual(failed.json());
  });

  it('delivered → failed is allowed and keeps the reason', async () => {
    const id = await sent();
    await setStatus(acc, id, 'delivered');
    const failed = await setStatus(acc, id, 'failed', 'bounced');
    expect(failed.json()).toMatchObject({ status: 'failed', failure_reason: 'bounced' });
    expect((await setStatus(acc, id, 'read')).json().status).toBe('failed');
    expect((await eventsFor(id)).map((e) => e.type)).toEqual([
      'message.delivered',
      'message.failed',
    ]);
  });

  it('an inbound message has no delivery status to set: 422', async () => {
    const message = await receive(acc, contactId, 'webchat');
    expectError(await setStatus(acc, message.id, 'read'), 422);
  });

  it('an unknown message id is a 404', async () => {
    expectError(await setStatus(acc, 'msg_00000000000000000000000000', 'delivered'), 404);
  });

  it('an unknown status value is a 422', async () => {
    const id = await sent();
    expectError(await setStatus(acc, id, 'sent'), 422, 'status');
    expectError(await setStatus(acc, id, 'bogus'), 422, 'status');
  });
});

describe('sandbox auto-advance (delivered after 1000 ms, read after 3000 ms)', () => {
  let a: TestApp;
  beforeAll(async () => {
    a = await startTestApp({
      config: { sandboxAutoAdvance: true, sandboxDeliveredAfterMs: 1000, sandboxReadAfterMs: 3000 },
    });
    // Frozen far ahead: a runner on real time in another test file never finds these jobs due.
    freezeClock(a.clock, 10 * 365 * 24 * 60 * 60 * 1000);
  });
  afterAll(() => a.close());

  /** The sandbox's own job handlers, scoped to the test's account (the jobs table is shared). */
  function runnerFor(acc: TestAccount): JobRunner {
    return new JobRunner({
      db: a.db,
      clock: a.clock,
      log: a.app.log,
      handlers: a.services.jobHandlers,
      accountId: acc.accountId,
    });
  }

  async function jobsOf(acc: TestAccount) {
    return a.db
      .selectFrom('jobs')
      .select(['id', 'kind', 'payload', 'run_at', 'attempts'])
      .where('account_id', '=', acc.accountId)
      .orderBy('run_at')
      .execute();
  }
  async function messageOf(acc: TestAccount, id: string) {
    const row = await a.db
      .selectFrom('messages')
      .select(['status', 'failure_reason'])
      .where('account_id', '=', acc.accountId)
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    return row;
  }

  it('a send writes its status jobs with the message; delivered comes due at 1000 ms, read at 3000 ms', async () => {
    const acc = await newAccount(a);
    const runner = runnerFor(acc);
    const contact = await createContact(acc);
    const sentAt = a.clock.now().getTime();
    const res = await sendText(acc, contact.id);
    expectStatus(res, 201);
    expect(res.json().status).toBe('sent');
    const id = res.json().id;

    const jobs = await jobsOf(acc);
    expect(
      jobs.map((j) => ({
        kind: j.kind,
        payload: j.payload,
        at: j.run_at.getTime() - sentAt,
        attempts: j.attempts,
      })),
    ).toEqual([
      {
        kind: 'sandbox.status',
        payload: { v: 1, message_id: id, status: 'delivered' },
        at: 1000,
        attempts: 0,
      },
      {
        kind: 'sandbox.status',
        payload: { v: 1, message_id: id, status: 'read' },
        at: 3000,
        attempts: 0,
      },
    ]);

    expect(await runner.drain()).toBe(0);
    a.clock.advance(999);
    expect(await runner.drain()).toBe(0);
    expect(await messageOf(acc, id)).toEqual({ status: 'sent', failure_reason: null });
    expect((await jobsOf(acc)).map((j) => j.attempts)).toEqual([0, 0]);

    a.clock.advance(1);
    expect(await runner.drain()).toBe(1);
    expect(await messageOf(acc, id)).toEqual({ status: 'delivered', failure_reason: null });
    expect((await eventsOf(a.db, acc.accountId)).map((e) => e.type)).toEqual([
      'contact.created',
      'message.created',
      'message.delivered',
    ]);
    expect((await jobsOf(acc)).map((j) => (j.payload as { status: string }).status)).toEqual([
      'read',
    ]);

    a.clock.advance(1999);
    expect(await runner.drain()).toBe(0);
    expect((await messageOf(acc, id)).status).toBe('delivered');

    a.clock.advance(1);
    expect(await runner.drain()).toBe(1);
    expect((await messageOf(acc, id)).status).toBe('read');
    const events = await eventsOf(a.db, acc.accountId);
    expect(events.map((e) => e.type)).toEqual([
      'contact.created',
      'message.created',
      'message.delivered',
      'message.read',
    ]);
    expect(events[3]!.data).toMatchObject({ id, status: 'read' });
    expect(await jobsOf(acc)).toEqual([]);
  });

  it('the simulated read never skips delivered: if the read job runs first (a worker stalled on delivered), both events still come, delivered first', async () => {
    const acc = await newAccount(a);
    const runner = runnerFor(acc);
    const contact = await createContact(acc);
    const id = (await sendText(acc, contact.id)).json().id;
    // Another worker claimed the delivered job and stalls on it.
    const [delivered] = await jobsOf(acc);
    await a.db
      .updateTable('jobs')
      .set({ locked_until: new Date(a.clock.now().getTime() + 3_600_000) })
      .where('account_id', '=', acc.accountId)
      .where('id', '=', delivered!.id)
      .execute();
    a.clock.advance(3000);
    await runner.drain();
    expect((await messageOf(acc, id)).status).toBe('read');
    const events = await eventsOf(a.db, acc.accountId);
    expect(events.map((e) => e.type)).toEqual([
      'contact.created',
      'message.created',
      'message.delivered',
      'message.read',
    ]);
    expect(events[2]!.data).toMatchObject({ id, status: 'delivered' });
    // The stalled worker's lease ends; its late delivered report changes nothing.
    a.clock.advance(3_600_000);
    await runner.drain();
    expect((await messageOf(acc, id)).status).toBe('read');
    expect(await eventsOf(a.db, acc.accountId)).toEqual(events);
    expect(await jobsOf(acc)).toEqual([]);
  });

  it('the reports of jobs that run together are applied together, each message still delivered then read, with its events in order', async () => {
    const acc = await newAccount(a);
    const runner = runnerFor(acc);
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const contact = await createContact(acc);
      ids.push((await sendText(acc, contact.id)).json().id);
    }
    const grouped = vi.spyOn(a.services.messages, 'applyStatusMany');
    try {
      a.clock.advance(3000);
      // 24 jobs due at once (each message's delivered and read): the runner starts them side by
      // side, and their reports share transactions.
      expect(await runner.drain()).toBe(24);
      const reports = grouped.mock.calls.reduce((n, call) => n + call[1].length, 0);
      expect(reports).toBe(36); // each read job reports delivered first
      expect(grouped.mock.calls.length).toBeLessThan(24);
    } finally {
      grouped.mockRestore();
    }
    for (const id of ids) expect((await messageOf(acc, id)).status).toBe('read');
    const events = (await eventsOf(a.db, acc.accountId)).filter((e) =>
      e.type.startsWith('message.'),
    );
    expect(events).toHaveLength(36);
    for (const id of ids) {
      const own = events.filter((e) => (e.data as { id: string }).id === id);
      expect(own.map((e) => e.type)).toEqual([
        'message.created',
        'message.delivered',
        'message.read',
      ]);
    }
    expect(await jobsOf(acc)).toEqual([]);
  });

  it('a report on a message that is gone fails its job, which is tried again later', async () => {
    const acc = await newAccount(a);
    const runner = runnerFor(acc);
    const contact = await createContact(acc);
    const id = (await sendText(acc, contact.id)).json().id;
    await a.db
      .deleteFrom('messages')
      .where('account_id', '=', acc.accountId)
      .where('id', '=', id)
      .execute();
    a.clock.advance(1000);
    await runner.drain();
    const [delivered] = await jobsOf(acc);
    expect(delivered).toMatchObject({ attempts: 1 });
    expect(delivered!.run_at.getTime()).toBeGreaterThan(a.clock.now().getTime());
  });

  it('a recipient whose phone ends in 0000 ends failed at delivery time with a reason, and is never read', async () => {
    const acc = await newAccount(a);
    const runner = runnerFor(acc);
    const phone = `+1415${String(Math.floor(Math.random() * 900) + 100)}0000`;
    const contact = await createContact(acc, phone);
    const res = await sendText(acc, contact.id);
    expectStatus(res, 201);
    expect(res.json().status).toBe('sent');
    const id = res.json().id;
    expect((await jobsOf(acc)).map((j) => (j.payload as { status: string }).status)).toEqual([
      'failed',
    ]);

    a.clock.advance(1000);
    await runner.drain();
    const failed = await messageOf(acc, id);
    expect(failed.status).toBe('failed');
    expect(failed.failure_reason).toEqual(expect.any(String));
    expect(failed.failure_reason!.length).toBeGreaterThan(0);

    a.clock.advance(10_000);
    await runner.drain();
    expect(await messageOf(acc, id)).toEqual(failed);
    expect((await eventsOf(a.db, acc.accountId)).map((e) => e.type)).toEqual([
      'contact.created',
      'message.created',
      'message.failed',
    ]);
    expect(await jobsOf(acc)).toEqual([]);
  });

  it('a send that fails validation leaves no job', async () => {
    const acc = await newAccount(a);
    const contact = await createContact(acc);
    const pending = await createTemplate(acc, 'Hello {{1}}', null);
    const approved = await createTemplate(acc, 'Hello {{1}}');
    const bad = [
      { channel: 'whatsapp', type: 'text', content: 'outside the window' },
      {
        channel: 'whatsapp',
        type: 'template',
        template_name: pending.name,
        template_params: ['Ann'],
      },
      { channel: 'whatsapp', type: 'template', template_name: approved.name, template_params: [] },
      { channel: 'whatsapp', type: 'template', template_name: 'missing_template' },
    ];
    for (const body of bad) {
      const r = await acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: contact.id, ...body },
      });
      expect([404, 422], r.body).toContain(r.statusCode);
    }
    expect(await jobsOf(acc)).toEqual([]);
    expect(
      await a.db
        .selectFrom('messages')
        .select('id')
        .where('account_id', '=', acc.accountId)
        .execute(),
    ).toEqual([]);
  });

  it('a status set by hand first makes the later scheduled updates no-ops (no duplicate events)', async () => {
    const acc = await newAccount(a);
    const runner = runnerFor(acc);
    const contact = await createContact(acc);
    const id = (await sendText(acc, contact.id)).json().id;
    const read = await acc.call({
      method: 'POST',
      url: `/v1/sandbox/messages/${id}/status`,
      payload: { status: 'read' },
    });
    expect(read.json().status).toBe('read');
    a.clock.advance(3000);
    await runner.drain();
    expect((await messageOf(acc, id)).status).toBe('read');
    expect((await eventsOf(a.db, acc.accountId)).map((e) => e.type)).toEqual([
      'contact.created',
      'message.created',
      'message.read',
    ]);
    expect(await jobsOf(acc)).toEqual([]);
  });
});
