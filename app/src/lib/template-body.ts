// A template body's numbered parameters ({{1}}, {{2}}…), read as the server reads them.

/** The highest placeholder number in the body (0 when it has none). */
export function placeholderCount(body: string): number {
  let n = 0;
  for (const m of body.matchAll(/\{\{(\d+)\}\}/g)) n = Math.max(n, Number(m[1]));
  return n;
}

/** The numbers missing below the highest (the server refuses a body with a gap). */
export function missingPlaceholders(body: string): number[] {
  const used = new Set([...body.matchAll(/\{\{(\d+)\}\}/g)].map((m) => Number(m[1])));
  const missing: number[] = [];
  for (let i = 1; i <= placeholderCount(body); i++) if (!used.has(i)) missing.push(i);
  return missing;
}

/** The body with each placeholder replaced by its sample (an empty sample keeps `{{n}}`). */
export function renderPreview(body: string, samples: string[]): string {
  return body.replace(/\{\{(\d+)\}\}/g, (all, i: string) => samples[Number(i) - 1] || all);
}
