import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputTail, awaitChildPort, stopChild } from './child.js';
import { expectJson } from './http.js';
import type { GraphPhoneNumber, GraphSends, GraphStats } from './graph-server.js';

export type { GraphPhoneNumber, GraphSends, GraphStats };

/** The benchmarks' fake Graph API (bench/lib/graph-server.ts), in a process of its own. */
export interface FakeGraph {
  /** `http://127.0.0.1:<port>`, for META_GRAPH_URL. */
  url: string;
  pid: number;
  /** Registers a phone number id that the token may send from and read. */
  addPhoneNumber(id: string, phone: GraphPhoneNumber): Promise<void>;
  stats(): Promise<GraphStats>;
  /** Every send answered, by recipient and content (only when started `keyed`). */
  sends(): Promise<GraphSends>;
  /** Zeroes the counts (phone numbers stay). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'graph-server.ts');
const START_TIMEOUT_MS = 30_000;

/**
 * Starts the fake Graph API (through tsx) as a child process: the service calls it on every
 * send, and answering inside the harness would take the event loop from autocannon, which
 * times the service.
 */
export async function startFakeGraph(
  projectRoot: string,
  opts: { keyed?: boolean } = {},
): Promise<FakeGraph> {
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
    cwd: projectRoot,
    env: { ...process.env, BENCH_GRAPH_KEYED: opts.keyed ? '1' : '0' },
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
    what: 'the fake Graph API',
    tail,
    timeoutMs: START_TIMEOUT_MS,
  });
  const url = `http://127.0.0.1:${listening}`;
  const pid = child.pid;
  if (pid === undefined) throw new Error('the fake Graph API has no pid');
  let stopping: Promise<void> | undefined;
  return {
    url,
    pid,
    addPhoneNumber: async (id, phone) =>
      void (await expectJson(200, `${url}/_bench/phone-numbers/${id}`, {
        method: 'PUT',
        body: phone,
      })),
    stats: async () => (await expectJson(200, `${url}/_bench/stats`)) as unknown as GraphStats,
    sends: async () =>
      (await expectJson(200, `${url}/_bench/sends`, { timeoutMs: 60_000 })) as GraphSends,
    reset: async () => void (await expectJson(200, `${url}/_bench/reset`, { method: 'POST' })),
    stop: () =>
      (stopping ??= (async () => {
        child.stdin?.end();
        await stopChild(child, 10_000);
      })()),
  };
}
