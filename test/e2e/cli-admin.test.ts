import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/database.js';
import { createPrivateDatabase } from '../helpers.js';
import { testDatabaseUrl } from '../database.js';
import { freePort, runCli, startService, stopProcess, type ServiceProcess } from './process.js';

const ADMIN_TOKEN = 'cli-admin-token-0123456789';

/** The entries of a help section ("Commands:", "Options:"): each `term  description`. */
function entries(help: string, section: string): { term: string; description: string }[] {
  const lines = help.split('\n');
  const start = lines.indexOf(section);
  expect(start, help).toBeGreaterThanOrEqual(0);
  const out: { term: string; description: string }[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '') break;
    if (/^ {2}\S/.test(line)) {
      const m = /^ {2}(\S.*?)(?: {2,}(\S.*))?$/.exec(line)!;
      out.push({ term: m[1]!, description: m[2] ?? '' });
    }
  }
  return out;
}

describe('switchboard --version and --help', () => {
  it('--version prints the version of package.json', { timeout: 120_000 }, async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    const res = await runCli({}, ['--version']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toBe(`${version}\n`);
  });

  it('describes every command, every subcommand, and every option of a subcommand', async () => {
    const top = await runCli({}, ['--help']);
    expect(top.code, top.stderr).toBe(0);
    const commands = entries(top.stdout, 'Commands:');
    expect(commands.map((c) => c.term.split(' ')[0])).toEqual([
      'serve',
      'worker',
      'migrate',
      'accounts',
      'api-keys',
      'users',
      'jobs',
      'listen',
      'demo',
      'help',
    ]);
    for (const c of commands) expect(c.description, c.term).not.toBe('');
    expect(entries(top.stdout, 'Options:').map((o) => o.term)).toContain('-V, --version');

    const groups: Record<string, string[]> = {
      accounts: ['create', 'update', 'get', 'list', 'help'],
      jobs: ['dead', 'retry', 'help'],
    };
    for (const [group, subcommands] of Object.entries(groups)) {
      const help = await runCli({}, [group, '--help']);
      const listed = entries(help.stdout, 'Commands:');
      expect(
        listed.map((c) => c.term.split(' ')[0]),
        group,
      ).toEqual(subcommands);
      for (const c of listed) expect(c.description, `${group} ${c.term}`).not.toBe('');
    }

    const dead = await runCli({}, ['jobs', 'dead', '--help']);
    const options = entries(dead.stdout, 'Options:');
    expect(options.map((o) => o.term)).toEqual([
      '--json',
      '--url, --api-url <url>',
      '--account <id>',
      '--limit <n>',
      '-h, --help',
    ]);
    for (const o of options) expect(o.description, o.term).not.toBe('');
    for (const command of ['listen', 'demo']) {
      const help = await runCli({}, [command, '--help']);
      const described = entries(help.stdout, 'Options:');
      expect(described.map((o) => o.term).join(' '), command).toContain('--url, --api-url');
      for (const o of described) expect(o.description, `${command} ${o.term}`).not.toBe('');
    }
  }, 400_000);
});

describe('a command that opens the store refuses an empty one', () => {
  it('a missing or empty DATA_DIR, creating nothing', { timeout: 400_000 }, async () => {
    const parent = mkdtempSync(path.join(os.tmpdir(), 'sb-cli-empty-'));
    try {
      const missing = path.join(parent, 'data');
      for (const args of [
        ['accounts', 'list'],
        ['jobs', 'dead'],
      ]) {
        const res = await runCli({ DATA_DIR: missing, DATABASE_URL: '' }, args);
        expect(res.code, args.join(' ')).toBe(1);
        expect(res.stderr).toBe(
          `switchboard: no store in DATA_DIR ${missing}: start the service first (switchboard serve), or pass --url to work through a running one\n`,
        );
        expect(res.stdout).toBe('');
        expect(existsSync(missing)).toBe(false);
      }
      // An existing but empty directory is no store either, and stays empty.
      const empty = path.join(parent, 'empty');
      await import('node:fs/promises').then((fs) => fs.mkdir(empty));
      const res = await runCli({ DATA_DIR: empty, DATABASE_URL: '' }, [
        'users',
        'invite',
        '--account',
        'acc_x',
        '--email',
        'a@example.com',
      ]);
      expect(res.code).toBe(1);
      expect(res.stderr).toContain(`no store in DATA_DIR ${empty}`);
      expect(readdirSync(empty)).toEqual([]);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it(
    'a DATABASE_URL without the migrations table, leaving it so',
    { timeout: 400_000 },
    async () => {
      const bare = await createPrivateDatabase({ migrated: false });
      try {
        const res = await runCli({ DATABASE_URL: bare.url }, ['accounts', 'list']);
        expect(res.code).toBe(1);
        expect(res.stderr).toBe(
          'switchboard: no store in the database at DATABASE_URL (no migrations table): start the service first (switchboard serve), or pass --url to work through a running one\n',
        );
        const db = createDb(bare.url, { max: 1 });
        try {
          const { rows } = await sql<{ n: string }>`
          SELECT count(*)::text AS n FROM pg_tables WHERE schemaname = 'public'`.execute(db);
          expect(rows[0]!.n).toBe('0');
        } finally {
          await db.destroy();
        }
        // migrate may create it.
        const migrated = await runCli({ DATABASE_URL: bare.url }, ['migrate']);
        expect(migrated.code, migrated.stderr).toBe(0);
        const listed = await runCli({ DATABASE_URL: bare.url }, ['accounts', 'list', '--json']);
        expect(listed.code, listed.stderr).toBe(0);
        expect(JSON.parse(listed.stdout)).toEqual({ data: [], total: 0, page: 1 });
      } finally {
        await bare.drop();
      }
    },
  );
});

describe('the operator commands through a running service (--url)', () => {
  let service: ServiceProcess;
  // Nothing here opens a store: a DATA_DIR that does not exist stays so.
  const noStore = path.join(os.tmpdir(), `sb-cli-nostore-${randomUUID()}`);
  const env = () => ({ ADMIN_TOKEN, DATA_DIR: noStore, DATABASE_URL: '' });
  const url = () => ['--url', service.base];

  beforeAll(async () => {
    service = await startService({ DATABASE_URL: testDatabaseUrl(), ADMIN_TOKEN }, [
      'serve',
      '--no-workers',
    ]);
  }, 400_000);
  afterAll(async () => {
    await stopProcess(service);
    expect(existsSync(noStore)).toBe(false);
  }, 60_000);

  it('creates and lists accounts, issues and lists keys without them, and invites', async () => {
    const created = await runCli(env(), [
      'accounts',
      'create',
      '--name',
      'Through the API',
      '--plan',
      'growth',
      '--json',
      ...url(),
    ]);
    expect(created.code, created.stderr).toBe(0);
    const account = JSON.parse(created.stdout) as { id: string; created_at: string };

    const listed = await runCli(env(), ['accounts', 'list', '--limit', '100', '--json', ...url()]);
    expect(listed.code, listed.stderr).toBe(0);
    const page = JSON.parse(listed.stdout) as {
      data: { id: string }[];
      total: number;
      page: number;
    };
    expect(page.page).toBe(1);
    expect(page.data).toContainEqual(account);
    const text = await runCli(env(), ['accounts', 'list', '--limit', '1', '--page', '1', ...url()]);
    expect(text.stdout).toMatch(/^acc_\S+ \(.+\)\n\d+ accounts, page 1\n$/);

    const key = await runCli(env(), [
      'api-keys',
      'create',
      '--account',
      account.id,
      '--name',
      'ci',
      '--json',
      '--api-url',
      service.base,
    ]);
    expect(key.code, key.stderr).toBe(0);
    const issued = JSON.parse(key.stdout) as { id: string; api_key: string; created_at: string };
    const keys = await runCli(env(), [
      'api-keys',
      'list',
      '--account',
      account.id,
      '--json',
      ...url(),
    ]);
    expect(keys.code, keys.stderr).toBe(0);
    expect(JSON.parse(keys.stdout)).toEqual([
      { id: issued.id, name: 'ci', created_at: issued.created_at },
    ]);
    const keysText = await runCli(env(), ['api-keys', 'list', '--account', account.id, ...url()]);
    expect(keysText.stdout).toBe(`${issued.id}  ci  created ${issued.created_at}\n`);
    expect(keysText.stdout).not.toContain(issued.api_key);

    const revoked = await runCli(env(), ['api-keys', 'revoke', issued.id, ...url()]);
    expect(revoked.stdout).toBe(`revoked ${issued.id}\n`);

    const email = `${randomUUID()}@example.com`;
    const invite = await runCli(env(), [
      'users',
      'invite',
      '--account',
      account.id,
      '--email',
      email,
      '--role',
      'admin',
      '--json',
      ...url(),
    ]);
    expect(invite.code, invite.stderr).toBe(0);
    const made = JSON.parse(invite.stdout) as { user_id: string; invite_url: string };
    expect(made.invite_url).toMatch(/\/app\/invite#token=[\w-]{43}$/);
    const accepted = await fetch(`${service.base}/v1/invites/accept`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        token: new URL(made.invite_url).hash.slice(7),
        password: 'long enough pw',
        name: 'Olive',
      }),
    });
    expect(accepted.status).toBe(201);

    const missing = await runCli(env(), ['api-keys', 'list', '--account', 'acc_missing', ...url()]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('switchboard: account acc_missing not found\n');
  }, 400_000);

  it('lists dead jobs and puts one back', async () => {
    const db = createDb(testDatabaseUrl(), { max: 1 });
    const account = `acc_cli_${randomUUID().slice(0, 8)}`;
    const id = `job_cli_${randomUUID().slice(0, 8)}`;
    const died = new Date('2030-01-02T03:04:05.000Z');
    try {
      await db
        .insertInto('jobs')
        .values({
          account_id: account,
          id,
          kind: 'broadcast.send',
          payload: JSON.stringify({ v: 1, broadcast_id: 'bc_gone' }),
          run_at: died,
          attempts: 6,
          last_error: 'invalid byte sequence for encoding "UTF8": 0x00\nat line 2',
          created_at: died,
          dead_at: died,
        })
        .execute();
      const listed = await runCli(env(), [
        'jobs',
        'dead',
        '--account',
        account,
        '--json',
        ...url(),
      ]);
      expect(listed.code, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout)).toEqual([
        {
          id,
          account_id: account,
          kind: 'broadcast.send',
          payload: { v: 1, broadcast_id: 'bc_gone' },
          attempts: 6,
          died_at: died.toISOString(),
          last_error: 'invalid byte sequence for encoding "UTF8": 0x00\nat line 2',
          created_at: died.toISOString(),
        },
      ]);
      const text = await runCli(env(), ['jobs', 'dead', '--account', account, ...url()]);
      expect(text.stdout).toBe(
        `${id}  ${account}  broadcast.send  attempts 6  died ${died.toISOString()}  invalid byte sequence for encoding "UTF8": 0x00\n`,
      );
      const retried = await runCli(env(), ['jobs', 'retry', id, ...url()]);
      expect(retried.code, retried.stderr).toBe(0);
      expect(retried.stdout).toBe(`queued ${id} (broadcast.send) again\n`);
      const row = await db
        .selectFrom('jobs')
        .select(['dead_at', 'attempts'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ dead_at: null, attempts: 0 });
      const none = await runCli(env(), ['jobs', 'dead', '--account', account, ...url()]);
      expect(none.stdout).toBe('no dead jobs\n');
      const again = await runCli(env(), ['jobs', 'retry', id, '--json', ...url()]);
      expect(again.code).toBe(1);
      expect(again.stderr).toBe(`switchboard: dead job ${id} not found\n`);
    } finally {
      await db.deleteFrom('jobs').where('account_id', '=', account).execute();
      await db.destroy();
    }
  }, 400_000);

  it('says in one line when ADMIN_TOKEN is missing or refused, or the service unreachable', async () => {
    const args = ['accounts', 'list'];
    const missing = await runCli({ ...env(), ADMIN_TOKEN: '' }, [...args, ...url()]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      "switchboard: ADMIN_TOKEN is not set: --url works through the service's admin API, with the service's ADMIN_TOKEN in the environment\n",
    );
    const wrong = await runCli({ ...env(), ADMIN_TOKEN: 'not-the-token' }, [...args, ...url()]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(
      `switchboard: the service at ${service.base} refused ADMIN_TOKEN (401): set it to the service's ADMIN_TOKEN\n`,
    );
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const down = await runCli(env(), [...args, '--url', nowhere]);
    expect(down.code).toBe(1);
    expect(down.stderr).toBe(
      `switchboard: cannot reach the service at ${nowhere} (ECONNREFUSED): is it running?\n`,
    );
    const bad = await runCli(env(), [...args, '--url', 'ftp://example.com']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('must be an http:// or https:// URL');
  }, 400_000);
});
