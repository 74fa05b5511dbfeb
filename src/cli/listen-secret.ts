import { createHash } from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { newWebhookSecret } from '../webhooks/signing.js';

/** `$XDG_CONFIG_HOME/switchboard` (`~/.config/switchboard` without it). */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'switchboard');
}

/**
 * The signing secret of `switchboard listen` for one service and API key, made on first use and
 * kept in `listen-secrets.json` under the config directory (mode 0600, the directory 0700), so
 * that a receiver under development keeps working from one run to the next. The file names
 * the key by a hash of it, never the key.
 */
export async function listenSecret(
  apiUrl: string,
  apiKey: string,
  dir = configDir(),
): Promise<{ secret: string; file: string }> {
  const file = path.join(dir, 'listen-secrets.json');
  const name = `${apiUrl} ${createHash('sha256').update(apiKey).digest('hex').slice(0, 16)}`;
  let secrets: Record<string, string> = {};
  try {
    const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
    if (parsed && typeof parsed === 'object') secrets = parsed as Record<string, string>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && !(err instanceof SyntaxError))
      throw err;
  }
  const kept = secrets[name];
  if (typeof kept === 'string' && kept.startsWith('whsec_')) return { secret: kept, file };
  const secret = newWebhookSecret();
  secrets[name] = secret;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Written whole and renamed, so that two runs at once never leave half a file.
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, file);
  return { secret, file };
}
