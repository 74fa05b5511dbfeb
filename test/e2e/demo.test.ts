import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, createPrivateDatabase } from '../helpers.js';
import { runCli, startService, stopProcess, type ServiceProcess } from './process.js';

interface Page<T> {
  data: T[];
  total: number;
}

// A fresh store (a database of its own, so that its first start prints the Default account's
// key), the service with its workers, and `switchboard demo` run against it twice.
describe('switchboard demo', () => {
  let db: Awaited<ReturnType<typeof createPrivateDatabase>>;
  let service: ServiceProcess;
  let dir: string;
  let key: string;

  beforeAll(async () => {
    db = await createPrivateDatabase();
    dir = await mkdtemp(path.join(tmpdir(), 'switchboard-demo-'));
    service = await startService({
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      // As the embedded store generates it: the web chat can then be connected.
      SECRETS_KEY: randomBytes(32).toString('base64'),
      SANDBOX_DELIVERED_AFTER_MS: '50',
      SANDBOX_READ_AFTER_MS: '100',
    });
    key = /sb_live_[A-Za-z0-9_-]+/.exec(service.stdout())![0];
    // The Default account is on Growth (100 requests a minute): two runs in a row would wait for
    // the window, which the demo does but a test need not.
    const account = /\((acc_[A-Za-z0-9]+),/.exec(service.stdout())![1]!;
    const raised = await fetch(`${service.base}/admin/accounts/${account}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ rate_limit_per_minute: 10_000 }),
    });
    expect(raised.status).toBe(200);
  }, 180_000);

  afterAll(async () => {
    if (service) await stopProcess(service);
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function get<T>(p: string): Promise<T> {
    const res = await fetch(`${service.base}/v1${p}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.status, p).toBe(200);
    return (await res.json()) as T;
  }

  async function snapshot() {
    const contacts =
      await get<Page<{ id: string; phone: string | null; tags: string[] }>>('/contacts?limit=100');
    const conversations = await get<
      Page<{ id: string; channel: string; status: string; assigned_to: unknown }>
    >('/conversations?status=all&limit=100');
    const templates = await get<Page<{ name: string; status: string }>>('/templates?limit=100');
    const broadcasts =
      await get<Page<{ id: string; name: string; status: string }>>('/broadcasts?limit=100');
    return { contacts, conversations, templates, broadcasts };
  }

  it('fills a fresh account with the key of the first start, then again adds nothing', async () => {
    // Without SWITCHBOARD_API_KEY: the key from the saved output of the first start.
    const log = path.join(dir, 'switchboard.log');
    await writeFile(log, service.stdout());
    const env = { SWITCHBOARD_API_KEY: '' };
    const first = await runCli(env, ['demo', '--url', service.base, '--from-log', log]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain(`Open the inbox: ${service.base}/app`);
    expect(first.stdout).toMatch(/contacts +12, tagged "demo" \(12 new\)/);

    const after = await snapshot();
    // A dozen sample contacts, and the web chat's visitor who became one.
    const demo = after.contacts.data.filter((c) => c.tags.includes('demo'));
    expect(demo).toHaveLength(13);
    expect(new Set(demo.map((c) => c.phone)).size).toBe(13);

    // Conversations on every channel, each with a history; one resolved, some assigned.
    const channels = new Set(after.conversations.data.map((c) => c.channel));
    expect([...channels].sort()).toEqual(['instagram', 'messenger', 'webchat', 'whatsapp']);
    expect(after.conversations.data.some((c) => c.status === 'resolved')).toBe(true);
    expect(after.conversations.data.filter((c) => c.assigned_to !== null).length).toBeGreaterThan(
      1,
    );
    // Each channel has a conversation with a back-and-forth.
    const talks = new Set<string>();
    for (const conv of after.conversations.data) {
      const messages = await get<{ data: { direction: string }[] }>(
        `/conversations/${conv.id}/messages`,
      );
      const directions = new Set(messages.data.map((m) => m.direction));
      if (directions.has('inbound') && directions.has('outbound')) talks.add(conv.channel);
    }
    expect([...talks].sort()).toEqual(['instagram', 'messenger', 'webchat', 'whatsapp']);
    const withNotes = await Promise.all(
      after.conversations.data.map((c) => get<{ data: unknown[] }>(`/conversations/${c.id}/notes`)),
    );
    expect(withNotes.some((n) => n.data.length > 0)).toBe(true);

    // Templates approved, and the broadcast sent to its recipients.
    expect(after.templates.data.map((t) => t.name).sort()).toEqual([
      'appointment_reminder',
      'order_shipped',
      'spring_sale',
    ]);
    expect(after.templates.data.every((t) => t.status === 'approved')).toBe(true);
    expect(after.broadcasts.data).toHaveLength(1);
    const broadcast = after.broadcasts.data[0]!;
    expect(broadcast.status).toBe('sent');
    const recipients = await get<Page<{ status: string }>>(
      `/broadcasts/${broadcast.id}/recipients?limit=100`,
    );
    expect(recipients.total).toBe(6);
    expect(recipients.data.every((r) => r.status !== 'queued' && r.status !== 'failed')).toBe(true);

    // A second run, with the key from the environment: it succeeds and duplicates nothing.
    const second = await runCli({ SWITCHBOARD_API_KEY: key }, ['demo', '--api-url', service.base]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain('Nothing new: the sample data was already there');
    const again = await snapshot();
    expect(again.contacts.total).toBe(after.contacts.total);
    expect(again.conversations.total).toBe(after.conversations.total);
    expect(again.templates.total).toBe(3);
    expect(again.broadcasts.total).toBe(1);
    const users = await get<Page<{ email: string }>>('/users?limit=100');
    expect(users.data.filter((u) => u.email === 'sam.rivera@example.com')).toHaveLength(1);
    const teams = await get<Page<unknown>>('/teams?limit=100');
    expect(teams.total).toBe(1);
  }, 300_000);

  it('says what to set when it has no key, and fails on a refused one', async () => {
    const none = await runCli({ SWITCHBOARD_API_KEY: '' }, [
      'demo',
      '--url',
      service.base,
      '--from-log',
      path.join(dir, 'missing.log'),
    ]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('set SWITCHBOARD_API_KEY');
    const wrong = await runCli({ SWITCHBOARD_API_KEY: 'sb_live_wrong' }, [
      'demo',
      '--url',
      service.base,
    ]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('the API key was refused');
  }, 150_000);
});
