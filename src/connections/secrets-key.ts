import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Config } from '../config.js';

/** Where the embedded default keeps the key it generated. */
export const SECRETS_KEY_FILE = 'secrets.key';

/**
 * The key that seals connection and webhook secrets: SECRETS_KEY when set; on the embedded
 * default (no DATABASE_URL), the one kept in DATA_DIR, generated (readable by the owner only) on
 * the first start. With DATABASE_URL it must be set (loadConfig refuses a configuration without
 * it). The key file sits beside the embedded database, so the two are backed up and lost together.
 */
export async function loadSecretsKey(
  config: Pick<Config, 'secretsKey' | 'databaseUrl' | 'dataDir'>,
): Promise<Buffer> {
  if (config.secretsKey) return config.secretsKey;
  if (config.databaseUrl) throw new ConfigError('SECRETS_KEY is required with DATABASE_URL');
  const file = path.join(config.dataDir, SECRETS_KEY_FILE);
  const existing = await readKeyFile(file);
  if (existing) return existing;
  await mkdir(config.dataDir, { recursive: true });
  const key = randomBytes(32);
  try {
    // `wx`: of two processes starting at once, one writes and the other reads what it wrote.
    await writeFile(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // The other process may not have filled it yet.
    for (let i = 0; i < 20; i++) {
      const written = await readKeyFile(file);
      if (written) return written;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new ConfigError(`${file} is empty`);
  }
}

async function readKeyFile(file: string): Promise<Buffer | null> {
  let raw: string;
  try {
    raw = (await readFile(file, 'utf8')).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  // A writer that has created the file but not yet filled it: treated as absent by the caller.
  if (raw === '') return null;
  const key = Buffer.from(raw, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(raw) || key.length !== 32) {
    throw new ConfigError(
      `${file} does not hold the base64 of 32 bytes; restore the original: connection and webhook secrets sealed under it cannot be read with another`,
    );
  }
  return key;
}
