import type pg from 'pg';
import { fmt } from './report.js';

/** What one session of the database was doing at one sample. */
interface Reading {
  who: string;
  what: string;
}

/**
 * A sampling profile of the database's sessions: every `intervalMs` it reads pg_stat_activity
 * and counts, per session kind (its application_name, or the backend's type for PostgreSQL's
 * own processes such as the WAL writer and the checkpointer), what each session was doing: on
 * the CPU (`active`), waiting (`active: IO/WalSync`, `active: LWLock/WALWrite`, …) or idle
 * inside a transaction. A count divided by the samples is how many sessions of that kind were in
 * that state on average; a wait that shows up under load and not before is where a statement's
 * time went. Idle sessions and the sampler's own are not counted.
 */
export class PgWaits {
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private samples = 0;
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly intervalMs = 20,
  ) {}

  start(): void {
    this.samples = 0;
    this.counts.clear();
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
  }

  /** Stops sampling; the profile since `start`, busiest first. */
  stop(): { samples: number; rows: { who: string; what: string; share: number }[] } {
    clearInterval(this.timer);
    const rows = [...this.counts.entries()]
      .map(([key, n]) => {
        const [who, what] = key.split('\u0000') as [string, string];
        return { who, what, share: n / Math.max(1, this.samples) };
      })
      .sort((a, b) => b.share - a.share);
    return { samples: this.samples, rows };
  }

  /** The profile as lines: sessions on average in each state, the `limit` busiest. */
  static format(profile: ReturnType<PgWaits['stop']>, limit = 12): string[] {
    const shown = profile.rows.filter((r) => r.share >= 0.005).slice(0, limit);
    return [
      `${profile.samples} samples; sessions on average, by kind and state:`,
      ...shown.map((r) => `  ${fmt(r.share, 2).padStart(6)}  ${r.who}: ${r.what}`),
    ];
  }

  private async sample(): Promise<void> {
    // A slow read is skipped rather than stacked.
    if (this.reading) return;
    this.reading = true;
    try {
      const { rows } = await this.pool.query<Reading>(
        `SELECT coalesce(nullif(application_name, ''), backend_type) AS who,
                CASE WHEN wait_event IS NULL THEN coalesce(state, 'running')
                     ELSE coalesce(state || ': ', '') || wait_event_type || '/' || wait_event
                END AS what
           FROM pg_stat_activity
          WHERE pid <> pg_backend_pid()
            AND (datname = current_database() OR datname IS NULL)
            AND coalesce(state, '') <> 'idle'
            AND wait_event_type IS DISTINCT FROM 'Activity'`,
      );
      this.samples++;
      for (const r of rows) {
        const key = `${r.who}\u0000${r.what}`;
        this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
      }
    } catch {
      // A sample lost (the server restarting) is not a figure.
    } finally {
      this.reading = false;
    }
  }
}

/** The server's WAL and checkpoint counters, as far as this version has them (else null). */
export interface WalCounters {
  walBytes: number;
  fullPageImages: number;
  walSyncs: number;
  checkpoints: number;
  buffersWrittenByBackends: number;
}

export async function walCounters(pool: pg.Pool): Promise<WalCounters | null> {
  try {
    const wal = await pool.query<{ wal_bytes: string; wal_fpi: string; wal_sync: string }>(
      'SELECT wal_bytes, wal_fpi, wal_sync FROM pg_stat_wal',
    );
    // PostgreSQL 17 moved the checkpoints to pg_stat_checkpointer; 15 and 16 have them here.
    const bg = await pool
      .query<{ checkpoints: string; backend: string }>(
        `SELECT checkpoints_timed + checkpoints_req AS checkpoints, buffers_backend AS backend
           FROM pg_stat_bgwriter`,
      )
      .catch(() =>
        pool.query<{ checkpoints: string; backend: string }>(
          'SELECT num_timed + num_requested AS checkpoints, 0 AS backend FROM pg_stat_checkpointer',
        ),
      );
    const w = wal.rows[0]!;
    const b = bg.rows[0]!;
    return {
      walBytes: Number(w.wal_bytes),
      fullPageImages: Number(w.wal_fpi),
      walSyncs: Number(w.wal_sync),
      checkpoints: Number(b.checkpoints),
      buffersWrittenByBackends: Number(b.backend),
    };
  } catch {
    return null;
  }
}

/** What changed between two readings, per recipient where that reads better. */
export function walLine(from: WalCounters | null, to: WalCounters | null, n: number): string {
  if (!from || !to) return 'WAL counters: not readable on this server';
  const bytes = to.walBytes - from.walBytes;
  return (
    `WAL: ${fmt(bytes / 1024 / 1024, 0)} MiB (${fmt(bytes / Math.max(1, n), 0)} B a recipient), ` +
    `${to.fullPageImages - from.fullPageImages} full-page images, ` +
    `${to.walSyncs - from.walSyncs} WAL syncs, ${to.checkpoints - from.checkpoints} checkpoints, ` +
    `${to.buffersWrittenByBackends - from.buffersWrittenByBackends} buffers written by backends`
  );
}
