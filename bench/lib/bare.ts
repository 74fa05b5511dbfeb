import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputTail, exited, stopChild } from './child.js';

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
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  const outcome = await Promise.race([
    port,
    spawnError,
    exited(child).then(() => 'exited' as const),
    new Promise<'timeout'>((resolve) =>
      setTimeout(() => resolve('timeout'), START_TIMEOUT_MS).unref(),
    ),
  ]);
  if (typeof outcome !== 'number') {
    await stopChild(child, 5_000);
    const why = outcome instanceof Error ? outcome.message : outcome;
    throw new Error(`the bare Fastify server did not start (${why}):\n${tail.toString()}`);
  }
  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${outcome}/contact`,
    stop: () =>
      (stopping ??= (async () => {
        child.stdin?.end();
        await stopChild(child, 10_000);
      })()),
  };
}
