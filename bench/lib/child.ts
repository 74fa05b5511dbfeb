import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

/** A port free on 127.0.0.1 when we looked (the caller retries if it is taken meanwhile). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : undefined;
      server.close(() =>
        port === undefined ? reject(new Error('no port assigned')) : resolve(port),
      );
    });
  });
}

/** The last lines a child wrote, quoted when it fails. Drains the streams so they never block it. */
export class OutputTail {
  private readonly lines: string[] = [];

  constructor(private readonly max = 40) {}

  follow(stream: Readable | null, onLine?: (line: string) => void): void {
    if (!stream) return;
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      this.lines.push(line);
      if (this.lines.length > this.max) this.lines.shift();
      onLine?.(line);
    });
  }

  toString(): string {
    return this.lines.length === 0 ? '(no output)' : this.lines.join('\n');
  }
}

export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Resolves when the child has exited (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (hasExited(child) || child.pid === undefined) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * SIGTERM, then SIGKILL if the child has not exited within `graceMs`. Returns how it ended:
 * 'graceful' (exited on SIGTERM) or 'killed'.
 */
export async function stopChild(
  child: ChildProcess,
  graceMs: number,
): Promise<'graceful' | 'killed'> {
  if (hasExited(child) || child.pid === undefined) return 'graceful';
  const done = exited(child);
  child.kill('SIGTERM');
  if (await settlesWithin(done, graceMs)) return 'graceful';
  child.kill('SIGKILL');
  await settlesWithin(done, 10_000);
  return 'killed';
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Waits until a child announces its port (`port` resolves), and fails with its output when it
 * cannot start: a spawn error, an early exit, or no port within `timeoutMs` (the child is then
 * stopped).
 */
export async function awaitChildPort(
  child: ChildProcess,
  port: Promise<number>,
  opts: { what: string; tail: OutputTail; timeoutMs: number },
): Promise<number> {
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  const outcome = await Promise.race([
    port,
    spawnError,
    exited(child).then(() => 'exited' as const),
    new Promise<'timeout'>((resolve) =>
      setTimeout(() => resolve('timeout'), opts.timeoutMs).unref(),
    ),
  ]);
  if (typeof outcome === 'number') return outcome;
  await stopChild(child, 5_000);
  const why = outcome instanceof Error ? outcome.message : outcome;
  throw new Error(`${opts.what} did not start (${why}):\n${opts.tail.toString()}`);
}
