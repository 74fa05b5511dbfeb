import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputTail, awaitChildPort, stopChild } from './child.js';

export interface BareServer {
  /** `http://127.0.0.1:<port>/contact` (the stream server: `http://127.0.0.1:<port>`) */
  url: string;
  /** Its process id (to sample its memory). */
  pid: number;
  stop(): Promise<void>;
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const START_TIMEOUT_MS = 30_000;

/** Starts bench/lib/bare-server.ts (through tsx) in a child process answering `body`. */
export async function startBareServer(projectRoot: string, body: unknown): Promise<BareServer> {
  const server = await startChildServer(projectRoot, 'bare-server.ts', 'the bare Fastify server', {
    BENCH_BARE_BODY: JSON.stringify(body),
  });
  return { ...server, url: `${server.url}/contact` };
}

/**
 * Starts bench/lib/bare-stream-server.ts (through tsx) in a child process: bare Fastify holding
 * Server-Sent Events streams (`GET /stream?id=`) and writing to one on `POST /push`.
 */
export async function startBareStreamServer(projectRoot: string): Promise<BareServer> {
  return startChildServer(projectRoot, 'bare-stream-server.ts', 'the bare Fastify stream server');
}

async function startChildServer(
  projectRoot: string,
  script: string,
  what: string,
  env: Record<string, string> = {},
): Promise<BareServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(HERE, script)], {
    cwd: projectRoot,
    env: { ...process.env, ...env },
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
  const listening = await awaitChildPort(child, port, { what, tail, timeoutMs: START_TIMEOUT_MS });
  if (child.pid === undefined) throw new Error(`${what} has no pid`);
  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${listening}`,
    pid: child.pid,
    stop: () =>
      (stopping ??= (async () => {
        child.stdin?.end();
        await stopChild(child, 10_000);
      })()),
  };
}
