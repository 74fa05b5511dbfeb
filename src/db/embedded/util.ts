import fs from 'node:fs/promises';

/** Small helpers shared by the embedded PostgreSQL modules. */

export async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

export function parsePid(content: string | undefined): number | undefined {
  const first = content?.split('\n')[0]?.trim();
  if (!first || !/^\d+$/.test(first)) return undefined;
  const pid = Number(first);
  // pid 0 would signal our whole process group.
  return pid > 0 ? pid : undefined;
}

export function errnoCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') {
    return err.code;
  }
  return undefined;
}

export function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
