import { ApiError } from '../../../api/client.js';

/**
 * An API refusal as messages by field (`details[].field` → issue); what concerns no field is
 * under ''.
 */
export function fieldErrors(err: unknown): Record<string, string> {
  if (!(err instanceof ApiError)) return { '': (err as Error).message };
  const details = (err.body as { error?: { details?: { field: string; issue: string }[] } })?.error
    ?.details;
  if (!details || details.length === 0) return { '': err.message };
  const out: Record<string, string> = {};
  for (const d of details) out[d.field] = out[d.field] ? `${out[d.field]}; ${d.issue}` : d.issue;
  return out;
}
