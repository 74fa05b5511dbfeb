import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** The newest modification time of any file under `dir` (0 for none). */
export function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    newest = Math.max(newest, statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** When `file` was last written, or 0 when it does not exist. */
export function builtAt(file: string): number {
  return statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0;
}
