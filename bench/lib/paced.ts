/**
 * Open-loop load at a fixed rate: request i is sent at start + i/rate, whatever happened to the
 * earlier ones (unlike autocannon's `overallRate`, which sends each connection's share of a
 * second in a burst at the start of that second). For latency figures at a steady rate.
 */
import http from 'node:http';
import { delay } from './child.js';
import { assertLocal } from './http.js';
import { percentile } from './report.js';

export interface PacedRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface PacedOptions {
  /** `http://127.0.0.1:<port>`. */
  baseUrl: string;
  /** Requests per second. */
  rate: number;
  /** Requests in all (the run lasts count / rate seconds). */
  count: number;
  /** Requests in flight at most (sockets); past it, sends wait and the lag is reported. */
  maxInFlight: number;
  /** Per request. */
  timeoutMs: number;
  request: (i: number) => PacedRequest;
  expectedStatus: number;
  onResponse?: (i: number, status: number, body: string) => void;
}

export interface PacedResult {
  sent: number;
  /** Responses with the expected status. */
  ok: number;
  statusCounts: Record<string, number>;
  errors: number;
  /** From the first send to the last response. */
  elapsedS: number;
  /** Sends per second actually achieved, first to last send. */
  sendRate: number;
  /** The most a send started after its scheduled time (ms). */
  maxLagMs: number;
  p50Ms: number;
  p99Ms: number;
}

export async function pacedLoad(opts: PacedOptions): Promise<PacedResult> {
  assertLocal(opts.baseUrl);
  const origin = new URL(opts.baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.maxInFlight });
  const latencies = new Float64Array(opts.count);
  const statusCounts: Record<string, number> = {};
  let ok = 0;
  let errors = 0;
  let inFlight = 0;
  let maxLagMs = 0;
  let lastSendAt = 0;
  const inflight = new Set<Promise<void>>();

  const send = (i: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const spec = opts.request(i);
      const t0 = performance.now();
      const headers: Record<string, string | number> = { ...spec.headers };
      if (spec.body !== undefined) headers['content-length'] = Buffer.byteLength(spec.body);
      const req = http.request(
        {
          host: origin.hostname,
          port: origin.port,
          method: spec.method,
          path: spec.path,
          headers,
          agent,
          timeout: opts.timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            statusCounts[status] = (statusCounts[status] ?? 0) + 1;
            if (status === opts.expectedStatus) {
              latencies[ok++] = performance.now() - t0;
              opts.onResponse?.(i, status, Buffer.concat(chunks).toString('utf8'));
            }
            resolve();
          });
          res.on('error', () => {
            errors++;
            resolve();
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(spec.body);
    });

  const start = performance.now();
  // Bounded: the schedule plus the per-request timeout and a margin.
  const deadline = start + (opts.count / opts.rate) * 1000 + opts.timeoutMs + 60_000;
  let next = 0;
  while (next < opts.count && performance.now() < deadline) {
    const now = performance.now();
    const due = Math.min(opts.count, Math.floor(((now - start) * opts.rate) / 1000) + 1);
    while (next < due && inFlight < opts.maxInFlight) {
      maxLagMs = Math.max(maxLagMs, now - (start + (next * 1000) / opts.rate));
      const i = next++;
      inFlight++;
      lastSendAt = performance.now();
      const task: Promise<void> = send(i).finally(() => {
        inFlight--;
        inflight.delete(task);
      });
      inflight.add(task);
    }
    await delay(1);
  }
  await Promise.all(inflight);
  const end = performance.now();
  agent.destroy();
  const kept = latencies.subarray(0, ok);
  return {
    sent: next,
    ok,
    statusCounts,
    errors,
    elapsedS: (end - start) / 1000,
    sendRate: next > 1 ? ((next - 1) * 1000) / (lastSendAt - start) : NaN,
    maxLagMs,
    p50Ms: percentile(kept, 50),
    p99Ms: percentile(kept, 99),
  };
}
