import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, type TestAccount, type TestApp } from '../helpers.js';
import {
  createBroadcast,
  createContact,
  createPrivateDatabase,
  createTemplate,
  expectError,
  expectStatus,
  freezeClock,
  jobsOf,
  postBroadcast,
  startAppOn,
  type BroadcastJson,
} from './broadcast-helpers.js';

const MINUTE = 60_000;
const ZERO_STATS = { sent: 0, delivered: 0, read: 0, replied: 0, failed: 0 };

let t: TestApp;
let dropDb: () => Promise<void>;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  dropDb = db.drop;
  t = await startAppOn(db.url);
});
afterAll(async () => {
  await t?.close();
  await dropDb?.();
});

const valid = () => ({
  name: 'Spring sale',
  channel: 'webchat',
  audience: { tags: ['vip'] },
  message: { type: 'text', content: 'Hello!' },
});

function inMinutes(minutes: number): string {
  return new Date(t.clock.now().getTime() + minutes * MINUTE).toISOString();
}

async function listed(
  acc: TestAccount,
  query = '',
): Promise<{ data: BroadcastJson[]; total: number; page: number }> {
  const res = await acc.call({ method: 'GET', url: `/v1/broadcasts${query}` });
  expectStatus(res, 200);
  return res.json();
}

describe('POST /v1/broadcasts validation', () => {
  it('a missing name, channel, audience or message is a 422 naming the field', async () => {
    const acc = await newAccount(t);
    for (const field of ['name', 'channel', 'audience', 'message'] as const) {
      const body: Record<string, unknown> = valid();
      delete body[field];
      expectError(await postBroadcast(acc, body), 422, 'validation_error', field);
    }
    expect((await listed(acc)).total).toBe(0);
  });

  it('an empty audience {} is a 422', async () => {
    const acc = await newAccount(t);
    expectError(await postBroadcast(acc, { ...valid(), audience: {} }), 422, 'validation_error');
  });

  it('audience.all: true combined with tags or lifecycle_stage is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, { ...valid(), audience: { all: true, tags: ['vip'] } }),
      422,
      'validation_error',
      'audience.all',
    );
    expectError(
      await postBroadcast(acc, { ...valid(), audience: { all: true, lifecycle_stage: 'lead' } }),
      422,
      'validation_error',
      'audience.all',
    );
    expectError(
      await postBroadcast(acc, {
        ...valid(),
        audience: { all: true, tags: ['vip'], lifecycle_stage: 'lead' },
      }),
      422,
      'validation_error',
      'audience.all',
    );
  });

  it('audience.all: false alone is a 422 (it selects nobody)', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, { ...valid(), audience: { all: false } }),
      422,
      'validation_error',
      'audience.all',
    );
  });

  it('an unknown audience field is a 422 naming it', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, { ...valid(), audience: { tags: ['vip'], segment: 'x' } }),
      422,
      'validation_error',
      'audience.segment',
    );
    expectError(
      await postBroadcast(acc, { ...valid(), audience: { tag: 'vip' } }),
      422,
      'validation_error',
      'audience.tag',
    );
  });

  it('an unknown lifecycle stage in the audience is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, { ...valid(), audience: { lifecycle_stage: 'prospect' } }),
      422,
      'validation_error',
      'audience.lifecycle_stage',
    );
  });

  it('a text message without content is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, { ...valid(), message: { type: 'text' } }),
      422,
      'validation_error',
      'message.content',
    );
  });

  it('a template message without template_name is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, {
        ...valid(),
        message: { type: 'template', template_params: ['a'] },
      }),
      422,
      'validation_error',
      'message.template_name',
    );
  });

  it('an unknown template is a 404', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, {
        ...valid(),
        message: { type: 'template', template_name: 'no_such_template' },
      }),
      404,
      'not_found',
    );
  });

  it('a pending or rejected template is a 422 validation_error (the documented case)', async () => {
    const acc = await newAccount(t);
    const pending = await createTemplate(acc, 'Hi there', null);
    const rejected = await createTemplate(acc, 'Hi there', 'rejected');
    for (const tpl of [pending, rejected]) {
      expectError(
        await postBroadcast(acc, {
          ...valid(),
          message: { type: 'template', template_name: tpl.name },
        }),
        422,
        'validation_error',
        'message.template_name',
      );
    }
    expect((await listed(acc)).total).toBe(0);
  });

  it('a template_params count other than the template placeholders is a 422', async () => {
    const acc = await newAccount(t);
    const tpl = await createTemplate(acc, 'Hi {{1}}, your code is {{2}}', 'approved');
    for (const params of [[], ['Ann'], ['Ann', '42', 'extra']]) {
      expectError(
        await postBroadcast(acc, {
          ...valid(),
          message: { type: 'template', template_name: tpl.name, template_params: params },
        }),
        422,
        'validation_error',
      );
    }
    const ok = await postBroadcast(acc, {
      ...valid(),
      message: { type: 'template', template_name: tpl.name, template_params: ['Ann', '42'] },
    });
    expectStatus(ok, 201);
  });

  it('scheduled_at without a time zone is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, { ...valid(), scheduled_at: '2030-01-01T10:00:00' }),
      422,
      'validation_error',
      'scheduled_at',
    );
    expectError(
      await postBroadcast(acc, { ...valid(), scheduled_at: 'tomorrow' }),
      422,
      'validation_error',
      'scheduled_at',
    );
  });

  it('scheduled_at less than 5 minutes ahead is a 422 (4 minutes, and the past)', async () => {
    const acc = await newAccount(t);
    expectError(
      await postBroadcast(acc, { ...valid(), scheduled_at: inMinutes(4) }),
      422,
      'validation_error',
      'scheduled_at',
    );
    expectError(
      await postBroadcast(acc, { ...valid(), scheduled_at: inMinutes(-60) }),
      422,
      'validation_error',
      'scheduled_at',
    );
    expect((await listed(acc)).total).toBe(0);
    expect(await jobsOf(t.db, acc.accountId)).toEqual([]);
  });

  it('scheduled_at exactly 5 minutes ahead is accepted, 1 ms less is not', async () => {
    const acc = await newAccount(t);
    const thaw = freezeClock(t.clock);
    try {
      const now = t.clock.now().getTime();
      const tooSoon = new Date(now + 5 * MINUTE - 1).toISOString();
      expectError(
        await postBroadcast(acc, { ...valid(), scheduled_at: tooSoon }),
        422,
        'validation_error',
        'scheduled_at',
      );
      const atLimit = new Date(now + 5 * MINUTE).toISOString();
      const res = await postBroadcast(acc, { ...valid(), scheduled_at: atLimit });
      expectStatus(res, 201);
      expect(res.json().scheduled_at).toBe(atLimit);
    } finally {
      thaw();
    }
  });
});

describe('POST /v1/broadcasts', () => {
  it('scheduled_at 6 minutes ahead: 201, status scheduled, zero stats, scheduled_at echoed', async () => {
    const acc = await newAccount(t);
    const at = inMinutes(6);
    const res = await postBroadcast(acc, { ...valid(), scheduled_at: at });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({ status: 'scheduled', scheduled_at: at, stats: ZERO_STATS });
    // Another zone is the same instant.
    const local = new Date(Date.parse(inMinutes(7)) + 2 * 60 * MINUTE)
      .toISOString()
      .replace('Z', '+02:00');
    const res2 = await postBroadcast(acc, { ...valid(), scheduled_at: local });
    expectStatus(res2, 201);
    expect(Date.parse(res2.json().scheduled_at)).toBe(Date.parse(local));
    expect(res2.json().scheduled_at).toMatch(/Z$/);
  });

  it('an immediate broadcast: 201, status sending, all-zero stats, the whole Broadcast object', async () => {
    const acc = await newAccount(t);
    // Contacts in the audience change nothing in the create response: stats start at zero.
    await createContact(acc, { tags: ['vip'] });
    const before = t.clock.now().getTime();
    const body = {
      name: 'Spring sale',
      channel: 'whatsapp',
      audience: { tags: ['vip', 'new'], lifecycle_stage: 'lead' },
      message: { type: 'text', content: 'Hello!' },
    };
    const res = await postBroadcast(acc, body);
    expectStatus(res, 201);
    const b = res.json();
    expect(Object.keys(b).sort()).toEqual(
      [
        'audience',
        'channel',
        'created_at',
        'failure_reason',
        'id',
        'message',
        'name',
        'scheduled_at',
        'stats',
        'status',
      ].sort(),
    );
    expect(b).toEqual({
      id: expect.stringMatching(/^bc_[0-9A-Z]+$/),
      name: 'Spring sale',
      channel: 'whatsapp',
      audience: { tags: ['vip', 'new'], lifecycle_stage: 'lead' },
      message: { type: 'text', content: 'Hello!' },
      status: 'sending',
      stats: ZERO_STATS,
      failure_reason: null,
      scheduled_at: null,
      created_at: expect.any(String),
    });
    expect(new Date(b.created_at).toISOString()).toBe(b.created_at);
    expect(Date.parse(b.created_at)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(b.created_at)).toBeLessThanOrEqual(t.clock.now().getTime());
    const got = await acc.call({ method: 'GET', url: `/v1/broadcasts/${b.id}` });
    expectStatus(got, 200);
    expect(got.json()).toEqual(b);
  });

  it('a template broadcast echoes its message; all: true echoes its audience', async () => {
    const acc = await newAccount(t);
    const tpl = await createTemplate(acc, 'Hi {{1}}', 'approved');
    const message = { type: 'template', template_name: tpl.name, template_params: ['Ann'] };
    const b = await createBroadcast(acc, { audience: { all: true }, message });
    expect(b.message).toEqual(message);
    expect(b.audience).toEqual({ all: true });
  });
});

describe('GET /v1/broadcasts', () => {
  it('lists newest first', async () => {
    const acc = await newAccount(t);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++)
      ids.push((await createBroadcast(acc, { name: `b${i}`, audience: { all: true } })).id);
    const page = await listed(acc);
    expect(page.total).toBe(4);
    expect(page.page).toBe(1);
    expect(page.data.map((b) => b.id)).toEqual([...ids].reverse());
    expect(page.data.map((b) => b.name)).toEqual(['b3', 'b2', 'b1', 'b0']);
  });

  it('filters by status', async () => {
    const acc = await newAccount(t);
    const sending = [
      (await createBroadcast(acc, { audience: { all: true } })).id,
      (await createBroadcast(acc, { audience: { all: true } })).id,
    ];
    const scheduled = (
      await createBroadcast(acc, { audience: { all: true }, scheduled_at: inMinutes(60) })
    ).id;
    const draft = (
      await createBroadcast(acc, { audience: { all: true }, scheduled_at: inMinutes(60) })
    ).id;
    expectStatus(await acc.call({ method: 'POST', url: `/v1/broadcasts/${draft}/cancel` }), 200);

    const ids = async (status: string) => {
      const page = await listed(acc, `?status=${status}`);
      expect(page.total).toBe(page.data.length);
      return page.data.map((b) => b.id);
    };
    expect(await ids('sending')).toEqual([...sending].reverse());
    expect(await ids('scheduled')).toEqual([scheduled]);
    expect(await ids('draft')).toEqual([draft]);
    expect(await ids('sent')).toEqual([]);
    expect(await ids('failed')).toEqual([]);
    expect((await listed(acc)).total).toBe(4);
  });

  it('an invalid status filter is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/broadcasts?status=done' }),
      422,
      'validation_error',
    );
    expectError(
      await acc.call({ method: 'GET', url: '/v1/broadcasts?state=sent' }),
      422,
      'validation_error',
    );
  });

  it('paginates with page and limit, without overlap or gaps', async () => {
    const acc = await newAccount(t);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await createBroadcast(acc, { audience: { all: true } })).id);
    const p1 = await listed(acc, '?limit=2');
    const p2 = await listed(acc, '?limit=2&page=2');
    const p3 = await listed(acc, '?limit=2&page=3');
    const p4 = await listed(acc, '?limit=2&page=4');
    expect([p1.page, p2.page, p3.page, p4.page]).toEqual([1, 2, 3, 4]);
    expect([p1.total, p2.total, p3.total, p4.total]).toEqual([5, 5, 5, 5]);
    expect([...p1.data, ...p2.data, ...p3.data].map((b) => b.id)).toEqual([...ids].reverse());
    expect(p4.data).toEqual([]);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/broadcasts?limit=101' }),
      422,
      'validation_error',
    );
    expectError(
      await acc.call({ method: 'GET', url: '/v1/broadcasts?page=0' }),
      422,
      'validation_error',
    );
  });
});

describe('GET /v1/broadcasts/{id}', () => {
  it('an unknown broadcast is a 404', async () => {
    const acc = await newAccount(t);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/broadcasts/bc_01ARZ3NDEKTSV4RRFFQ69G5FAV' }),
      404,
      'not_found',
    );
    expectError(
      await acc.call({ method: 'GET', url: '/v1/broadcasts/nonsense' }),
      404,
      'not_found',
    );
  });

  it("another account's broadcast is a 404 and not in this account's list", async () => {
    const owner = await newAccount(t);
    const other = await newAccount(t);
    const b = await createBroadcast(owner, { audience: { all: true } });
    const s = await createBroadcast(owner, {
      audience: { all: true },
      scheduled_at: inMinutes(30),
    });
    expectError(
      await other.call({ method: 'GET', url: `/v1/broadcasts/${b.id}` }),
      404,
      'not_found',
    );
    expectError(
      await other.call({ method: 'POST', url: `/v1/broadcasts/${s.id}/cancel` }),
      404,
      'not_found',
    );
    expect(await listed(other)).toEqual({ data: [], total: 0, page: 1 });
    expect((await listed(owner)).data.map((x) => x.id)).toEqual([s.id, b.id]);
    // The failed cancel changed nothing for the owner.
    expect((await owner.call({ method: 'GET', url: `/v1/broadcasts/${s.id}` })).json().status).toBe(
      'scheduled',
    );
  });
});
