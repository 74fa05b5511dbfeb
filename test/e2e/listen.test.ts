import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpsServer } from '../https-server.js';
import { TcpProxy } from '../tcp-proxy.js';
import { testDatabaseUrl } from '../database.js';
import { runCli, spawnCli, startService, stopProcess, type ServiceProcess } from './process.js';

const ADMIN = 'listen-test-admin-token';
const SECRETS_KEY = randomBytes(32).toString('base64');

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A plain-http receiver on 127.0.0.1 that records each POST and answers `status()`. */
async function startReceiver(status: (n: number) => number = () => 200) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(status(received.length)).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    received,
    url: `http://127.0.0.1:${port}/hook`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `switchboard listen …`, running until stopped. */
function startListen(env: Record<string, string>, args: string[]) {
  const { child, stdout, stderr, exited: ended } = spawnCli(env, ['listen', ...args]);
  const exited = ended.then((e) => e.code);
  return {
    child,
    exited,
    stdout,
    stderr,
    secret: () => /Signing secret: (whsec_[A-Za-z0-9+/=]+)/.exec(stdout())?.[1],
    /** Waits until stdout matches, or fails with the output. */
    async until(pattern: RegExp, timeoutMs = 90_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!pattern.test(stdout())) {
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`listen never printed ${pattern}:\n${stdout()}\n${stderr()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop(): Promise<number | null> {
      if (child.exitCode === null) child.kill('SIGINT');
      return exited;
    },
  };
}

async function until(check: () => boolean, what: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs / 1000} s: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function call<T>(url: string, init: { method: string; auth: string; body?: unknown }) {
  const res = await fetch(url, {
    method: init.method,
    headers: {
      authorization: `Bearer ${init.auth}`,
      ...(init.body !== undefined && { 'content-type': 'application/json' }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${init.method} ${url}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

// Each test starts CLI processes, slow on a loaded two-core machine.
describe('switchboard listen', { timeout: 240_000 }, () => {
  let service: ServiceProcess;
  let config: string;

  async function newKey(): Promise<string> {
    const account = await call<{ id: string }>(`${service.base}/admin/accounts`, {
      method: 'POST',
      auth: ADMIN,
      body: { name: 'Listen', plan: 'growth' },
    });
    const key = await call<{ api_key: string }>(
      `${service.base}/admin/accounts/${account.id}/api-keys`,
      { method: 'POST', auth: ADMIN, body: {} },
    );
    return key.api_key;
  }

  /** A new contact: one `contact.created` event; its id. */
  async function contact(key: string, base = service.base): Promise<string> {
    const phone = `+1415${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;
    const c = await call<{ id: string }>(`${base}/v1/contacts`, {
      method: 'POST',
      auth: key,
      body: { phone, name: randomUUID() },
    });
    return c.id;
  }

  function verified(secret: string, r: Received) {
    return new Webhook(secret).verify(r.body, {
      'webhook-id': String(r.headers['webhook-id']),
      'webhook-timestamp': String(r.headers['webhook-timestamp']),
      'webhook-signature': String(r.headers['webhook-signature']),
    }) as { id: string; event: string; data: { id: string } };
  }

  beforeAll(async () => {
    config = await mkdtemp(path.join(tmpdir(), 'switchboard-listen-'));
    // No ALLOW_PRIVATE_TARGETS: listen needs none, though a real webhook (below) does.
    // No workers: the webhook deliveries below are the next service's alone.
    service = await startService(
      {
        DATABASE_URL: testDatabaseUrl(),
        ADMIN_TOKEN: ADMIN,
        SECRETS_KEY,
        ALLOW_PRIVATE_TARGETS: 'false',
      },
      ['serve', '--no-workers'],
    );
  });

  afterAll(async () => {
    if (service) await stopProcess(service);
    await rm(config, { recursive: true, force: true });
  });

  it('forwards each event signed as a webhook delivery, with a secret kept for the next run', async () => {
    const key = await newKey();
    const receiver = await startReceiver();
    const env = { SWITCHBOARD_API_KEY: key, XDG_CONFIG_HOME: config };
    const listen = startListen(env, ['--forward-to', receiver.url, '--api-url', service.base]);
    try {
      await listen.until(/^Ready/m);
      const secret = listen.secret()!;
      expect(secret).toMatch(/^whsec_/);
      const file = path.join(config, 'switchboard', 'listen-secrets.json');
      expect((await stat(file)).mode & 0o777).toBe(0o600);

      const ids = [await contact(key), await contact(key)];
      await until(() => receiver.received.length === 2, 'two events forwarded');
      const events = receiver.received.map((r) => verified(secret, r));
      expect(events.map((e) => [e.event, e.data.id])).toEqual([
        ['contact.created', ids[0]],
        ['contact.created', ids[1]],
      ]);
      expect(receiver.received[0]!.headers['webhook-id']).toBe(events[0]!.id);
      expect(receiver.received[0]!.headers['user-agent']).toBe('Switchboard-Webhooks/1.0');
      await listen.until(new RegExp(`^200 contact\\.created ${events[1]!.id}$`, 'm'));
      expect(listen.stdout()).toContain(`200 contact.created ${events[0]!.id}\n`);
      expect(await listen.stop()).toBe(0);

      // A second run for the same service and key signs with the same secret.
      const again = startListen(env, ['--forward-to', receiver.url, '--url', `${service.base}/v1`]);
      await again.until(/^Ready/m);
      expect(again.secret()).toBe(secret);
      expect(await again.stop()).toBe(0);
    } finally {
      await listen.stop();
      await receiver.close();
    }
  });

  it('--events forwards only those types; an unknown type is refused in one line', async () => {
    const key = await newKey();
    const receiver = await startReceiver();
    const env = { SWITCHBOARD_API_KEY: key, XDG_CONFIG_HOME: config };
    const unknown = await runCli(env, [
      'listen',
      '--forward-to',
      receiver.url,
      '--events',
      'contact.created,message.recieved',
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(
      /unknown event type "message\.recieved"; known: message\.received/,
    );

    const listen = startListen(env, [
      '--forward-to',
      receiver.url,
      '--api-url',
      service.base,
      '--events',
      'contact.updated',
    ]);
    try {
      await listen.until(/^Ready/m);
      const secret = listen.secret()!;
      const contactId = await contact(key);
      await call(`${service.base}/v1/contacts/${contactId}`, {
        method: 'PUT',
        auth: key,
        body: { name: 'Renamed' },
      });
      await until(() => receiver.received.length === 1, 'the update forwarded');
      await new Promise((r) => setTimeout(r, 1000));
      expect(receiver.received.map((r) => verified(secret, r).event)).toEqual(['contact.updated']);
    } finally {
      await listen.stop();
      await receiver.close();
    }
  });

  it('a missing or refused key is one line', async () => {
    const missing = await runCli({ SWITCHBOARD_API_KEY: '', XDG_CONFIG_HOME: config }, [
      'listen',
      '--forward-to',
      'http://127.0.0.1:9/hook',
      '--api-url',
      service.base,
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      'switchboard listen: set SWITCHBOARD_API_KEY to the API key of the account (sb_live_…)\n',
    );
    const refused = await runCli(
      { SWITCHBOARD_API_KEY: 'sb_live_not_a_key', XDG_CONFIG_HOME: config },
      ['listen', '--forward-to', 'http://127.0.0.1:9/hook', '--api-url', service.base],
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^switchboard listen: the service refused the stream: 401 .+\n$/,
    );
  });

  it('resumes after the connection drops, before the first event or after one, with no event lost or forwarded twice', async () => {
    const key = await newKey();
    const receiver = await startReceiver();
    const proxy = await new TcpProxy(service.port).start();
    const listen = startListen({ SWITCHBOARD_API_KEY: key, XDG_CONFIG_HOME: config }, [
      '--forward-to',
      receiver.url,
      '--api-url',
      `http://127.0.0.1:${proxy.port}`,
    ]);
    try {
      await listen.until(/^Ready/m);
      const ids: string[] = [];
      const drops = () => listen.stderr().match(/stream dropped/g)?.length ?? 0;
      const dropped = async () => {
        const before = drops();
        await proxy.cut();
        // Written while listen cannot reach the service.
        for (let i = 0; i < 2; i++) ids.push(await contact(key));
        await until(() => drops() > before, 'the drop noticed');
        await proxy.restore();
      };
      // Before any event came: resumed from where the stream started.
      await dropped();
      ids.push(await contact(key));
      await until(() => receiver.received.length === 3, 'the events of the first drop');
      expect(listen.stderr()).toMatch(/^reconnected$/m);
      // After events came: resumed after the last one forwarded.
      await dropped();
      ids.push(await contact(key));
      await until(() => receiver.received.length >= 6, 'every event forwarded');
      await new Promise((r) => setTimeout(r, 1500));
      const secret = listen.secret()!;
      expect(receiver.received.map((r) => verified(secret, r).data.id)).toEqual(ids);
      expect(listen.stderr()).toMatch(/reconnected, after evt_/);
    } finally {
      await listen.stop();
      await proxy.close();
      await receiver.close();
    }
  });

  describe('beside a real webhook', () => {
    let withWebhooks: ServiceProcess;

    beforeAll(async () => {
      withWebhooks = await startService({
        DATABASE_URL: testDatabaseUrl(),
        ADMIN_TOKEN: ADMIN,
        // For the registered https webhook on 127.0.0.1 only.
        ALLOW_PRIVATE_TARGETS: 'true',
        SECRETS_KEY,
      });
    });

    afterAll(async () => {
      if (withWebhooks) await stopProcess(withWebhooks);
    });

    it("a receiver's 500 is printed, not retried, and the next events and the real webhook's deliveries still arrive", async () => {
      const key = await newKey();
      const real = await startHttpsServer();
      await call(`${withWebhooks.base}/v1/webhooks`, {
        method: 'POST',
        auth: key,
        body: { url: real.url('/real'), events: ['contact.created'] },
      });
      const receiver = await startReceiver((n) => (n === 1 ? 500 : 200));
      const listen = startListen({ SWITCHBOARD_API_KEY: key, XDG_CONFIG_HOME: config }, [
        '--forward-to',
        receiver.url,
        '--api-url',
        withWebhooks.base,
      ]);
      try {
        await listen.until(/^Ready/m);
        const first = await contact(key, withWebhooks.base);
        const second = await contact(key, withWebhooks.base);
        await listen.until(/^500 contact\.created evt_\w+$/m);
        await listen.until(/^200 contact\.created evt_\w+$/m);
        await new Promise((r) => setTimeout(r, 1000));
        expect(receiver.received.map((r) => verified(listen.secret()!, r).data.id)).toEqual([
          first,
          second,
        ]);
        await until(() => real.requests.length >= 2, 'the real webhook delivered both');
        const delivered = real.requests.map(
          (r) => (JSON.parse(r.body.toString()) as { data: { id: string } }).data.id,
        );
        expect(delivered.sort()).toEqual([first, second].sort());
      } finally {
        await listen.stop();
        await receiver.close();
        await real.close();
      }
    });

    it('an unreachable receiver is printed with the error, and listen goes on', async () => {
      const key = await newKey();
      const receiver = await startReceiver();
      const port = new URL(receiver.url).port;
      await receiver.close();
      const listen = startListen({ SWITCHBOARD_API_KEY: key, XDG_CONFIG_HOME: config }, [
        '--forward-to',
        `http://127.0.0.1:${port}/hook`,
        '--api-url',
        withWebhooks.base,
      ]);
      try {
        await listen.until(/^Ready/m);
        await contact(key, withWebhooks.base);
        await listen.until(
          /^ERR contact\.created evt_\w+ \(connect ECONNREFUSED 127\.0\.0\.1:\d+\)$/m,
        );
        expect(await listen.stop()).toBe(0);
      } finally {
        await listen.stop();
      }
    });
  });
});
