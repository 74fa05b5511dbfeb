import { readFile } from 'node:fs/promises';

/** VmRSS of a process in bytes (Linux /proc), or null where there is none. */
export async function readRssBytes(pid: number): Promise<number | null> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Samples a process's VmRSS every `intervalMs` until stopped. */
export class RssSampler {
  private readonly samples: Array<{ at: number; bytes: number }> = [];
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> = Promise.resolve();

  constructor(
    private readonly pid: number,
    private readonly intervalMs = 250,
  ) {}

  start(): void {
    if (this.timer) return;
    const sample = () => {
      this.reading = readRssBytes(this.pid).then((bytes) => {
        if (bytes !== null) this.samples.push({ at: performance.now(), bytes });
      });
    };
    sample();
    this.timer = setInterval(sample, this.intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.reading;
  }

  /** The largest sample taken at or after `from` (performance.now() time), or NaN. */
  peakSince(from: number): number {
    let peak = NaN;
    for (const s of this.samples) if (s.at >= from && !(s.bytes <= peak)) peak = s.bytes;
    return peak;
  }

  /** Samples taken in [from, to). */
  between(from: number, to: number): number[] {
    return this.samples.filter((s) => s.at >= from && s.at < to).map((s) => s.bytes);
  }
}
