import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputTail, awaitChildPort, stopChild } from './child.js';

export interface BareServer {
  /** `http://127.0.0.1:<port>/contact` */
  url: string;
  stop(): Promise<void>;
}

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bare-server.ts');
const START_TIMEOUT_MS = 30_000;

/** Starts bench/lib/bare-server.ts (through tsx) in a child process answering `body`. */
export async function startBareServer(projectRoot: string, body: unknown): Promise<BareServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
    cwd: projectRoot,
    env: { ...process.env, BENCH_BARE_BODY: JSON.stringify(body) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const tail = new OutputTail();
  tail.follow(child.stderr);
  let resolvePort: (port: number) => void = () => undefined;
  const port = new Promise<number>((resolve) => (resolvePort = resolve));
  tail.follow(child.stdout, (line) => {
    const match = /^\{"port":(\d+)\}$/.exec(line);
    if (match) resolvePort(Number(match[1]));
  });
  const listening = await awaitChildPort(child, port, {
    what: 'the bare Fastify server',
    tail,
    timeoutMs: START_TIMEOUT_MS,
  });
  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${listening}/contact`,
    stop: () =>
      (stopping ??= (async () => {
        child.stdin?.end();
        await stopChild(child, 10_000);
      })()),
  };
}
