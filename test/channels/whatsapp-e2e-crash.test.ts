import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SEND_LEASE_MS } from '../../src/messages/send-pipeline.js';
import { IN_DOUBT_REASON } from '../../src/messages/send-recorder.js';
import {
  PUBLIC_URL,
  connectedAccount,
  contactWrites,
  createContact,
  drain,
  events,
  jobsOf,
  outboundRows,
  startE2E,
  whatsappBody,
  type E2E,
} from './whatsapp-e2e-helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterAll(() => e?.close());

/**
 * The service as operators run it (`switchboard serve --no-workers`), in a process of its own on
 * the test's database and fake Graph API; resolves with its base URL once it listens.
 */
async function startApiProcess(): Promise<{
  child: ChildProcess;
  url: string;
  output: () => string;
}> {
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'serve', '--no-workers'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: e.databaseUrl,
      SECRETS_KEY: e.secretsKey.toString('base64'),
      META_GRAPH_URL: e.graph.url,
      PUBLIC_URL,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      ALLOW_PRIVATE_TARGETS: 'true',
      REDIS_URL: '',
      ADMIN_TOKEN: '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the API did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const listening = /listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (listening) {
        clearTimeout(timer);
        resolve(listening[1]!);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the API exited (${code}):\n${output}`));
    });
  });
  return { child, url, output: () => output };
}

it('an API process killed between the commit and Graph’s answer: when the lease ends the runner taking over fails the message in doubt, never sending it again', async () => {
  const c = await connectedAccount(e);
  const contact = await createContact(c.acc);
  await contactWrites(e, c, contact);

  const api = await startApiProcess();
  const exited = new Promise<void>((resolve) => api.child.once('exit', () => resolve()));
  try {
    e.graph.hang(c.sendMatcher, 1);
    const pending = fetch(`${api.url}/v1/messages/send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.acc.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        contact_id: contact.id,
        channel: 'whatsapp',
        type: 'text',
        content: 'did you get this?',
      }),
    }).then(
      (res) => ({ answered: res.status }),
      (err: unknown) => ({ failed: String(err) }),
    );
    // Graph has the request (so the message and its job are committed); no answer comes.
    await e.graph.waitFor(c.sendMatcher, 1, 20_000);
    api.child.kill('SIGKILL');
    await exited;
    // The client never hears back.
    expect(await pending).toMatchObject({ failed: expect.any(String) });
  } finally {
    if (api.child.exitCode === null && api.child.signalCode === null) {
      api.child.kill('SIGKILL');
      await exited;
    }
  }
  expect(api.child.signalCode).toBe('SIGKILL');

  const [queued, ...others] = await outboundRows(e, c.acc.accountId);
  expect(others).toEqual([]);
  expect(queued).toMatchObject({ status: 'queued', provider_message_id: null });
  const [job] = await jobsOf(e, c.acc.accountId, 'message.send');
  // Held by the dead process's first attempt (its clock is real time).
  expect(job!.locked_until!.getTime()).toBe(queued!.created_at.getTime() + SEND_LEASE_MS);

  // Before the lease ends no runner may take the job; after it, one does: Graph may have the
  // message (there is no idempotency key), so it is failed rather than sent a second time.
  expect(await drain(e, c.acc.accountId)).toBe(0);
  e.t.clock.advance(job!.locked_until!.getTime() - e.t.clock.now().getTime() + 1);
  expect(await drain(e, c.acc.accountId)).toBe(1);

  const reqs = e.graph.find(c.sendMatcher);
  expect(reqs).toHaveLength(1);
  expect(reqs[0]!.body.toString('utf8')).toBe(
    whatsappBody(contact.phone, 'text', { body: 'did you get this?', preview_url: false }),
  );
  const rows = await outboundRows(e, c.acc.accountId);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({
    id: queued!.id,
    status: 'failed',
    failure_reason: IN_DOUBT_REASON,
    provider_message_id: null,
  });
  expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
  expect(await events(e, c.acc.accountId, 'message.failed')).toHaveLength(1);
}, 120_000);
