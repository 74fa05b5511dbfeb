// The all-in-one service's /metrics: the API thread's registry adds the workers' thread's
// counters (Metrics.addSource with the other's ownCounters), and nothing else of it.
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics/metrics.js';

/** The value of the one sample `name{labels}` in an exposition, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const count = (text: string, name: string) =>
  text.split('\n').filter((l) => l.startsWith(`# TYPE ${name} `)).length;

function twoThreads() {
  const api = new Metrics();
  const workers = new Metrics();
  api.addSource(() => workers.ownCounters());
  return { api, workers };
}

describe('a registry with a source', () => {
  it('sums the counters and histograms both count', async () => {
    const { api, workers } = twoThreads();
    api.broadcastRecipients(2, 1);
    workers.broadcastRecipients(500, 3);
    api.webhookAttempt('success', 200, 0.02);
    workers.webhookAttempt('success', 200, 0.2);
    workers.webhookAttempt('gave_up', null, 7);
    const text = await api.expose(null);
    expect(sample(text, 'switchboard_broadcast_recipients_total{outcome="sent"}')).toBe(502);
    expect(sample(text, 'switchboard_broadcast_recipients_total{outcome="failed"}')).toBe(4);
    expect(
      sample(text, 'switchboard_webhook_attempts_total{outcome="success",status_class="2xx"}'),
    ).toBe(2);
    expect(
      sample(
        text,
        'switchboard_webhook_attempt_duration_seconds_bucket{le="0.05",status_class="2xx"}',
      ),
    ).toBe(1);
    expect(
      sample(text, 'switchboard_webhook_attempt_duration_seconds_count{status_class="network"}'),
    ).toBe(1);
    // Each metric once, however many registries hold it.
    expect(count(text, 'switchboard_broadcast_recipients_total')).toBe(1);
  });

  it("shows the process-wide series once, as the API thread's, the start time and lag included", async () => {
    const { api } = twoThreads();
    // Block the event loop a few times so that the lag histogram has something to report.
    for (let i = 0; i < 5; i++) {
      const until = performance.now() + 40;
      while (performance.now() < until);
      await new Promise((r) => setTimeout(r, 20));
    }
    const text = await api.expose(null);
    expect(count(text, 'switchboard_process_resident_memory_bytes')).toBe(1);
    expect(sample(text, 'switchboard_process_start_time_seconds')).toBeGreaterThan(0);
    // Read once per scrape: a second read would find the lag figures just reset (no samples).
    const max = sample(text, 'switchboard_nodejs_eventloop_lag_max_seconds');
    const mean = sample(text, 'switchboard_nodejs_eventloop_lag_mean_seconds');
    expect(max).toBeGreaterThan(0.02);
    expect(Number.isNaN(mean)).toBe(false);
    expect(mean).toBeGreaterThan(0);
  });

  it("takes none of the source's gauges: the queue gauges are left out when unread", async () => {
    const { api, workers } = twoThreads();
    expect((await workers.ownCounters()).map((m) => String(m.type))).not.toContain('gauge');
    const text = await api.expose(null);
    expect(text).not.toMatch(/^switchboard_webhook_deliveries_pending /m);
    expect(text).not.toMatch(/^switchboard_jobs_due\{/m);
    const read = await api.expose({
      jobs: [{ kind: 'message.send', queued: 3, due: 2, dead: 0, oldestDueAgeSeconds: 1 }],
      webhookDeliveries: { pending: 4, due: 1, oldestDueAgeSeconds: 0 },
    });
    expect(sample(read, 'switchboard_webhook_deliveries_pending')).toBe(4);
    expect(sample(read, 'switchboard_jobs_due{kind="message.send"}')).toBe(2);
  });
});
