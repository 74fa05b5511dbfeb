import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputTail, awaitChildPort, stopChild } from './child.js';
import type { ReceiverCommand, ReceiverDump, ReceiverStats } from './webhook-receiver.js';

export interface WebhookReceiver {
  /** `https://localhost:<port>/hook` (the test certificate names localhost). */
  url: string;
  /** Checks X-Service-Signature with this secret from now on (mismatches are counted). */
  setSecret(secret: string): Promise<void>;
  stats(): Promise<ReceiverStats>;
  dump(): Promise<ReceiverDump>;
  /** Forgets everything recorded so far. */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'webhook-receiver.ts');
const START_TIMEOUT_MS = 30_000;
const COMMAND_TIMEOUT_MS = 30_000;

type Command = ReceiverCommand extends infer C
  ? C extends unknown
    ? Omit<C, 'id'>
    : never
  : never;

/** Starts bench/lib/webhook-receiver.ts (through tsx) in a child process. */
export async function startWebhookReceiver(projectRoot: string): Promise<WebhookReceiver> {
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
    cwd: projectRoot,
    env: { ...process.env, BENCH_TLS_DIR: path.join(projectRoot, 'test', 'fixtures', 'tls') },
    stdio: ['pipe', 'pipe', 'pipe', 'ipc'],
    // Structured clone over IPC: NaN survives (JSON would turn it into null).
    serialization: 'advanced',
  });
  const tail = new OutputTail();
  tail.follow(child.stdout);
  tail.follow(child.stderr);

  let nextId = 1;
  const waiting = new Map<number, (reply: Record<string, unknown>) => void>();
  let resolvePort: (port: number) => void = () => undefined;
  const port = new Promise<number>((resolve) => (resolvePort = resolve));
  child.on('message', (msg: Record<string, unknown>) => {
    if (msg.type === 'ready' && typeof msg.port === 'number') resolvePort(msg.port);
    if (typeof msg.id === 'number') {
      waiting.get(msg.id)?.(msg);
      waiting.delete(msg.id);
    }
  });
  const listening = await awaitChildPort(child, port, {
    what: 'the webhook receiver',
    tail,
    timeoutMs: START_TIMEOUT_MS,
  });

  const command = (cmd: Command): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the webhook receiver did not answer "${cmd.cmd}":\n${tail.toString()}`));
      }, COMMAND_TIMEOUT_MS);
      waiting.set(id, (reply) => {
        clearTimeout(timer);
        resolve(reply);
      });
      child.send({ ...cmd, id }, (err) => {
        if (!err) return;
        clearTimeout(timer);
        waiting.delete(id);
        reject(err);
      });
    });

  let stopping: Promise<void> | undefined;
  return {
    url: `https://localhost:${listening}/hook`,
    setSecret: async (secret) => void (await command({ cmd: 'secret', secret })),
    stats: async () => (await command({ cmd: 'stats' })).stats as ReceiverStats,
    dump: async () => (await command({ cmd: 'dump' })).dump as ReceiverDump,
    reset: async () => void (await command({ cmd: 'reset' })),
    stop: () =>
      (stopping ??= (async () => {
        child.stdin?.end();
        if (child.connected) child.disconnect();
        await stopChild(child, 10_000);
      })()),
  };
}
