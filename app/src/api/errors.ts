import { ApiError } from './client.js';

interface Detail {
  field: string;
  issue: string;
}

function detailsOf(err: ApiError): Detail[] {
  return (err.body as { error?: { details?: Detail[] } } | undefined)?.error?.details ?? [];
}

/** What a refusal says, for a `role="alert"`: each field's issue, else the API's message. */
export function errorText(err: unknown, fallback = 'Something went wrong. Try again.'): string {
  if (err instanceof ApiError) {
    const details = detailsOf(err);
    if (details.length > 0)
      return details.map((d) => `${d.field.replace(/^body\.?/, '')}: ${d.issue}`).join('; ');
    return err.message;
  }
  return err instanceof Error ? err.message : fallback;
}

/**
 * A refusal as messages by field (`details[].field` → its issues), to show beside each field;
 * what concerns no field is under ''.
 */
export function fieldErrors(err: unknown): Record<string, string> {
  if (!(err instanceof ApiError)) return { '': errorText(err) };
  const details = detailsOf(err);
  if (details.length === 0) return { '': err.message };
  const out: Record<string, string> = {};
  for (const d of details) out[d.field] = out[d.field] ? `${out[d.field]}; ${d.issue}` : d.issue;
  return out;
}
