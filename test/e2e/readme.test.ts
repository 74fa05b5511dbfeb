import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './process.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Block {
  index: number;
  code: string;
  mode: 'run' | 'background' | 'skip';
  /** For a background block: the text its output shows once it is ready. */
  readyWhen?: string;
  reason?: string;
}

/**
 * The README's ```sh and ```bash blocks in order, each with the `<!-- readme-test: … -->` marker
 * right before it, if any: `background, ready when "…"` or `skip: <why>`.
 */
export function readmeBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const pattern =
    /(?:<!--\s*readme-test:\s*([\s\S]*?)-->\s*\n)?^```(sh|bash)[^\n]*\n([\s\S]*?)^```/gm;
  for (const match of markdown.matchAll(pattern)) {
    const marker = match[1]?.trim();
    const block: Block = { index: blocks.length, code: match[3] ?? '', mode: 'run' };
    if (marker?.startsWith('background')) {
      block.mode = 'background';
      block.readyWhen = /ready when "([^"]+)"/.exec(marker)?.[1];
      if (block.readyWhen === undefined)
        throw new Error(`background block without "ready when": ${marker}`);
    } else if (marker?.startsWith('skip')) {
      block.mode = 'skip';
      block.reason = marker.replace(/^skip:?\s*/, '');
      if (block.reason === '') throw new Error('a skipped README block must say why');
    } else if (marker !== undefined) {
      throw new Error(`unknown readme-test marker: ${marker}`);
    }
    blocks.push(block);
  }
  return blocks;
}

/**
 * A newcomer's checkout: the files git knows (tracked, or new and not ignored), without
 * node_modules, dist or data, in a directory others may enter (the embedded PostgreSQL runs as
 * `postgres` when the suite runs as root).
 */
async function freshCheckout(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchboard-readme-'));
  await chmod(dir, 0o755);
  const files = execFileSync(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  )
    .split('\0')
    .filter((f) => f !== '');
  for (const file of files) {
    const target = path.join(dir, file);
    await mkdir(path.dirname(target), { recursive: true });
    await copyFile(path.join(ROOT, file), target).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e; // deleted in the working tree but not yet in the index
    });
  }
  return dir;
}

/** Resolves once `ready()` holds, polling every 200 ms; rejects when `failed()` says why, or at the deadline. */
async function until(
  ready: () => boolean,
  failed: () => string | null,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (ready()) return;
    const failure = failed();
    if (failure !== null) throw new Error(`${what}: ${failure}`);
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * One bash session, as a person's terminal: variables and functions carry from one block to the
 * next. `set -eo pipefail` makes any failing command end the session, so a block "exits 0"
 * only if each of its commands does.
 */
class Shell {
  private readonly child: ChildProcess;
  private output = '';
  private exit: number | null = null;
  private blockCount = 0;

  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', ['--noprofile', '--norc'], {
      cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.child.stderr?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.child.on('exit', (code) => (this.exit = code ?? 1));
    this.child.stdin?.write('set -eo pipefail\n');
  }

  /** Runs a block to its end; resolves with what it printed, rejects if it failed. */
  async run(code: string, timeoutMs: number): Promise<string> {
    const marker = `__readme_block_${this.blockCount++}_done__`;
    const start = this.output.length;
    this.child.stdin?.write(`${code}\necho; echo ${marker}\n`);
    await until(
      () => this.output.includes(marker, start),
      () => (this.exit !== null ? `the shell ended with ${this.exit}` : null),
      timeoutMs,
      'block',
    ).catch((e: Error) => {
      throw new Error(
        `${e.message}\n--- block ---\n${code}\n--- output ---\n${this.output.slice(start)}`,
      );
    });
    return this.output.slice(start, this.output.indexOf(marker, start));
  }

  async close(): Promise<void> {
    if (this.exit !== null) return;
    this.child.stdin?.end('exit 0\n');
    await new Promise((r) => this.child.once('exit', r));
  }
}

/** Processes of a process group that are alive (orphans may linger as zombies where PID 1 does not reap). */
function livingMembers(group: number): number {
  let count = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z' && Number(fields[2]) === group) count++;
    } catch {
      // gone meanwhile
    }
  }
  return count;
}

/** A block run in the background in its own process group (as a terminal of its own). */
class Background {
  readonly child: ChildProcess;
  private output = '';
  private exit: number | null = null;
  readonly exited: Promise<void>;

  constructor(code: string, cwd: string, env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', code], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.child.stderr?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.exited = new Promise((resolve) =>
      this.child.on('exit', (code) => {
        this.exit = code ?? 1;
        resolve();
      }),
    );
  }

  text(): string {
    return this.output;
  }

  async ready(text: string, timeoutMs: number): Promise<void> {
    await until(
      () => this.output.includes(text),
      () => (this.exit !== null ? `it ended with ${this.exit}:\n${this.output}` : null),
      timeoutMs,
      `waiting for "${text}"`,
    );
  }

  /**
   * SIGTERM to the whole group, as closing its terminal would, then waits until no process of
   * the group is left alive (the service stops its PostgreSQL before it exits); SIGKILL after 60 s.
   */
  async stop(): Promise<void> {
    const group = this.child.pid;
    if (group === undefined) return;
    const signal = (s: NodeJS.Signals) => {
      try {
        process.kill(-group, s);
      } catch {
        // ESRCH: nothing of the group is left
      }
    };
    signal('SIGTERM');
    const deadline = Date.now() + 60_000;
    while (livingMembers(group) > 0) {
      if (Date.now() > deadline) signal('SIGKILL');
      if (Date.now() > deadline + 10_000) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await this.exited;
  }
}

describe('the README, run as a newcomer runs it', () => {
  let checkout: string;
  const started: Background[] = [];

  beforeAll(async () => {
    checkout = await freshCheckout();
  }, 120_000);

  afterAll(async () => {
    for (const b of started.splice(0)) await b.stop();
    await rm(checkout, { recursive: true, force: true });
  }, 120_000);

  it('parses its markers', async () => {
    const blocks = readmeBlocks(await readFile(path.join(ROOT, 'README.md'), 'utf8'));
    expect(blocks[0]?.mode).toBe('background');
    expect(blocks[0]?.code).toMatch(/^npm ci && npm start/); // the promise comes first
    expect(blocks.filter((b) => b.mode === 'skip').length).toBeLessThanOrEqual(1);
  });

  // The README's service brings its own embedded PostgreSQL whatever the suite runs on, so the
  // run on TEST_DATABASE_URL (CI's second pass) would only repeat it.
  it.skipIf(process.env.TEST_DATABASE_URL)(
    'every shell block exits 0, in order, on a fresh checkout and a free port',
    async () => {
      const blocks = readmeBlocks(await readFile(path.join(checkout, 'README.md'), 'utf8'));
      // The newcomer's environment, on a free port, with npm kept off the network: `npm ci`
      // installs from the local npm cache, and nothing else is fetched.
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        PORT: String(await freePort()),
        npm_config_offline: 'true',
        npm_config_audit: 'false',
        npm_config_fund: 'false',
        npm_config_update_notifier: 'false',
      };
      for (const name of Object.keys(env)) {
        // What vitest and `npm test` set is not part of a newcomer's terminal.
        if (/^(VITEST|TEST_|npm_lifecycle|npm_package|INIT_CWD)/.test(name)) delete env[name];
      }
      delete env.DATABASE_URL;
      delete env.DATA_DIR;
      const shell = new Shell(checkout, env);
      const outputs: { code: string; output: string }[] = [];
      try {
        for (const block of blocks) {
          if (block.mode === 'skip') continue;
          if (block.mode === 'background') {
            const bg = new Background(block.code, checkout, env);
            started.push(bg);
            // npm ci, a full build and a first initdb on a busy two-core machine.
            await bg.ready(block.readyWhen!, 10 * 60_000);
            outputs.push({ code: block.code, output: bg.text() });
            continue;
          }
          outputs.push({ code: block.code, output: await shell.run(block.code, 3 * 60_000) });
        }
      } finally {
        await shell.close();
      }

      const after = (pattern: RegExp) => {
        const found = outputs.find((o) => pattern.test(o.code));
        expect(found, `no README block matches ${pattern}`).toBeDefined();
        return found!.output;
      };
      expect(after(/npm start/)).toMatch(/Its API key, shown only this once:\s+sb_live_/);
      expect(after(/app\/setup#token=/)).toMatch(
        /^http:\/\/127\.0\.0\.1:\d+\/app\/setup#token=[\w-]{43}\s*$/,
      );
      expect(after(/npm start/)).toMatch(
        /first admin[^\n]*:\s+http:\/\/127\.0\.0\.1:\d+\/app\/setup#token=[\w-]{43}\s/,
      );
      expect(after(/export KEY=/)).toContain('{"data":[],"total":0,"page":1}');
      expect(after(/echo \$CONTACT/)).toMatch(/^\s*con_[0-9A-Z]{26}\s*$/);
      expect(after(/sandbox\/inbound/)).toMatch(/"direction":"inbound".*"status":"delivered"/);
      // The reply: its conversation lists it, sent and outbound.
      expect(after(/MESSAGE=\$\(/)).toMatch(/"total":1/);
      expect(after(/sandbox\/templates/)).toMatch(
        /"type":"template","content":"Hi Ada, your order #1042 has shipped\.".*"status":"sent"/,
      );
      expect(after(/--forward-to/)).toMatch(
        /Signing secret: whsec_[\s\S]*\n200 contact\.created evt_[0-9A-Z]{26}\n/,
      );
      const events = after(/kill \$STREAM/);
      expect(events).toContain('event: message.received');
      expect(events).toContain('event: message.delivered');
      expect(events).toContain('event: message.read');
    },
    20 * 60_000,
  );
});
