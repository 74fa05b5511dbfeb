import { readFile, readdir } from 'node:fs/promises';

/** Clock ticks a second of /proc's utime and stime (USER_HZ, 100 on Linux). */
const TICKS_PER_S = 100;

/** User and system CPU time a process has used, in seconds (Linux /proc), or null. */
async function cpuSeconds(pid: number): Promise<number | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name, which may hold spaces, in its parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
  } catch {
    return null;
  }
}

/** The process ids whose command name is `name` (every PostgreSQL backend, say). */
async function pidsNamed(name: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    const comm = await readFile(`/proc/${entry}/comm`, 'utf8').catch(() => '');
    if (comm.trim() === name) pids.push(Number(entry));
  }
  return pids;
}

/** CPU used by each group over a span, as cores busy on average (1.0 = one core all the time). */
export interface CpuShares {
  [group: string]: number;
}

/**
 * Measures the CPU of named process groups between `start()` and `stop()`: a group is a fixed
 * process id, or every process of a command name (found again at the end, so backends that come
 * and go are counted while they live only if they are still there; PostgreSQL's pooled backends
 * stay). On machines without /proc every share is NaN.
 */
export class CpuMeter {
  private before = new Map<number, number>();
  private startedAt = 0;

  constructor(private readonly groups: Record<string, number | string>) {}

  private async pids(): Promise<Map<string, number[]>> {
    const out = new Map<string, number[]>();
    for (const [group, who] of Object.entries(this.groups)) {
      out.set(group, typeof who === 'number' ? [who] : await pidsNamed(who));
    }
    return out;
  }

  async start(): Promise<void> {
    this.before.clear();
    for (const pids of (await this.pids()).values()) {
      for (const pid of pids) {
        const s = await cpuSeconds(pid);
        if (s !== null) this.before.set(pid, s);
      }
    }
    this.startedAt = performance.now();
  }

  async stop(): Promise<CpuShares> {
    const elapsedS = (performance.now() - this.startedAt) / 1000;
    const shares: CpuShares = {};
    for (const [group, pids] of await this.pids()) {
      let used = 0;
      let seen = false;
      for (const pid of pids) {
        const s = await cpuSeconds(pid);
        if (s === null) continue;
        seen = true;
        used += s - (this.before.get(pid) ?? 0);
      }
      shares[group] = seen ? used / elapsedS : NaN;
    }
    return shares;
  }
}
