import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { createContact, expectStatus } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';
import { TEST_SECRETS_ENV } from '../secrets-key.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LEASE_MS = 1_000;

let t: WebhookTestApp;
beforeAll(async () => {
  // The worker process runs on real time; so does this clock (not frozen), moved on only past the lease.
  t = await startWebhookTestApp({ frozen: false });
});
afterAll(() => t.close());

it(
  'a worker killed (SIGKILL) mid-delivery loses nothing: the delivery is made once its lease ends',
  { timeout: 60_000 },
  async () => {
    const rcv = await startHttpsServer(() => ({ status: 200, delayMs: 2_000 }));
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/webhooks/fixtures/worker.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: t.databaseUrl,
        ...TEST_SECRETS_ENV,
        LEASE_MS: String(LEASE_MS),
        NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS ?? 'test/fixtures/tls/ca.pem',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = once(child, 'exit');
    try {
      const acc = await newAccount(t);
      const created = await acc.call({
        method: 'POST',
        url: '/v1/webhooks',
        payload: { url: rcv.url('/hook'), events: ['contact.created'] },
      });
      expectStatus(created, 201);
      const wh = created.json();
      await createContact(acc);

      // The worker has sent it and waits for the (2 s) answer: kill it now.
      try {
        await expect.poll(() => rcv.requests.length, { timeout: 30_000, interval: 50 }).toBe(1);
      } catch (err) {
        throw new Error(`the worker delivered nothing; its output: ${output}`, { cause: err });
      }
      child.kill('SIGKILL');
      const [code, signal] = await exited;
      expect(signal ?? code).toBe('SIGKILL');

      const deliveryRow = () =>
        t.db
          .selectFrom('webhook_deliveries')
          .selectAll()
          .where('account_id', '=', acc.accountId)
          .where('webhook_id', '=', wh.id)
          .executeTakeFirstOrThrow();
      const claimed = await deliveryRow();
      expect(claimed).toMatchObject({ state: 'pending', attempts: 1 });
      expect(claimed.locked_until).not.toBeNull();

      // Past the dead worker's lease, any dispatcher takes it over.
      t.clock.advance(LEASE_MS);
      const dispatcher = t.dispatcher();
      try {
        expect(await dispatcher.drain()).toBe(1);
      } finally {
        await dispatcher.stop();
      }
      // At least once: the receiver saw the event twice, with the same id.
      expect(rcv.requests).toHaveLength(2);
      expect(rcv.requests[1]!.headers['x-service-event-id']).toBe(
        rcv.requests[0]!.headers['x-service-event-id'],
      );
      expect(rcv.requests[1]!.body.equals(rcv.requests[0]!.body)).toBe(true);
      const row = await deliveryRow();
      expect(row.state).toBe('delivered');
      const log = (
        await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries` })
      ).json();
      expect(log.data[0]).toMatchObject({ status_code: 200, error: null });
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      await rcv.close();
    }
  },
);
