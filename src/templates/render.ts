import { ValidationError } from '../errors.js';

const PLACEHOLDER = /\{\{\s*(\d+)\s*\}\}/g;

/** How many parameters a body takes; its placeholders must be {{1}}…{{n}} without gaps. */
export function placeholderCount(body: string, field = 'body'): number {
  const seen = new Set<number>();
  for (const m of body.matchAll(PLACEHOLDER)) seen.add(Number(m[1]));
  for (let i = 1; i <= seen.size; i++) {
    if (!seen.has(i))
      throw new ValidationError(
        field,
        `placeholders must be numbered {{1}} to {{${seen.size}}} without gaps`,
      );
  }
  return seen.size;
}

/** Fills {{1}}…{{n}} with exactly n parameters. */
export function renderTemplate(body: string, params: string[], field = 'template_params'): string {
  const expected = placeholderCount(body);
  if (params.length !== expected) {
    throw new ValidationError(
      field,
      `the template takes exactly ${expected} parameter${expected === 1 ? '' : 's'}, got ${params.length}`,
    );
  }
  return body.replace(PLACEHOLDER, (_m, n: string) => params[Number(n) - 1]!);
}
