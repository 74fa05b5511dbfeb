import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

// Running as root: PostgreSQL (and pg_ctl) refuse to, so they run as the `postgres` system user.

export const SUPERUSER = 'postgres';

/** uid/gid to run PostgreSQL's programs as; empty when we are not root and run them as ourselves. */
export interface RunAs {
  uid?: number;
  gid?: number;
}

const execFileAsync = promisify(execFile);

export async function resolveRunAs(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  let ids = await lookupUser(SUPERUSER);
  if (!ids) {
    try {
      await execFileAsync('groupadd', [SUPERUSER]);
      await execFileAsync('useradd', ['-g', SUPERUSER, SUPERUSER]);
    } catch (err) {
      throw new Error(
        `Running as root, PostgreSQL needs a "${SUPERUSER}" system user, and creating it failed`,
        { cause: err },
      );
    }
    ids = await lookupUser(SUPERUSER);
    if (!ids) throw new Error(`Created the "${SUPERUSER}" user but cannot look up its uid/gid`);
  }
  return ids;
}

async function lookupUser(name: string): Promise<{ uid: number; gid: number } | undefined> {
  try {
    const [u, g] = await Promise.all([
      execFileAsync('id', ['-u', name]),
      execFileAsync('id', ['-g', name]),
    ]);
    const uid = Number.parseInt(u.stdout.trim(), 10);
    const gid = Number.parseInt(g.stdout.trim(), 10);
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * initdb/postgres only say "Permission denied" when a parent directory is closed to the
 * postgres user (mkdtemp creates 0700 directories), so find the culprit up front and add
 * it to any startup error. Only a hint, not a check: ACLs may grant access anyway.
 */
export async function traversalHint(dataDir: string, runAs: RunAs): Promise<string> {
  if (runAs.uid === undefined) return '';
  for (let dir = dataDir; ; dir = path.dirname(dir)) {
    const st = await fs.stat(dir).catch(() => undefined);
    if (st) {
      const traversable =
        (st.uid === runAs.uid && (st.mode & 0o100) !== 0) ||
        (st.gid === runAs.gid && (st.mode & 0o010) !== 0) ||
        (st.mode & 0o001) !== 0;
      if (!traversable) {
        return (
          ` (Switchboard runs as root, so PostgreSQL runs as user "${SUPERUSER}" (uid ${runAs.uid}),` +
          ` which cannot enter ${dir} (mode ${(st.mode & 0o777).toString(8)}); make it traversable)`
        );
      }
    }
    if (path.dirname(dir) === dir) return '';
  }
}

export async function ensureOwnedBy(target: string, runAs: RunAs): Promise<void> {
  if (runAs.uid === undefined || runAs.gid === undefined) return;
  const st = await fs.stat(target);
  if (st.uid === runAs.uid && st.gid === runAs.gid) return;
  // A cluster created while not running as root must be handed over whole, or postgres
  // fails on the first file it cannot open.
  await chownTree(target, runAs.uid, runAs.gid);
}

async function chownTree(target: string, uid: number, gid: number): Promise<void> {
  await fs.lchown(target, uid, gid);
  const st = await fs.lstat(target);
  if (!st.isDirectory()) return;
  for (const entry of await fs.readdir(target)) {
    await chownTree(path.join(target, entry), uid, gid);
  }
}
