import { ValidationError } from '../errors.js';
import { PLACEHOLDER, placeholderCount } from '../channels/provider-templates.js';

export { placeholderCount };

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
