/**
 * Reading Meta's webhook payloads (WhatsApp's, Messenger's, Instagram's): the envelope
 * (`object`, `entry[]`, then `changes[]` or `messaging[]`) and the field readers both adapters
 * use. The payload has been signed by Meta, but its shape is still checked field by field:
 * anything unexpected is skipped or kept as readable text, never a crash.
 */

export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
export const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

const LONE_SURROGATES = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A string as PostgreSQL can keep it: NUL characters dropped, lone surrogates replaced (JSON
 * allows both, a text column neither). Empty is absent.
 */
export const str = (v: unknown): string | null => {
  if (typeof v !== 'string') return null;
  const text = v.replaceAll('\u0000', '').replace(LONE_SURROGATES, '\uFFFD');
  return text === '' ? null : text;
};

/** Ids arrive as strings, and in some payloads (template ids, page ids) as numbers. */
export const idOf = (v: unknown): string | null =>
  typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : str(v);

/** A finite number, as JSON gives it. */
export const num = (v: unknown): number | null =>
  typeof v === 'number' && Number.isFinite(v) ? v : null;

/** A finite number, given as a number or as a numeric string (WhatsApp's coordinates, codes). */
export const numeric = (v: unknown): number | null =>
  num(v) ??
  (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : null);

/** The entries of a webhook about `object` (`whatsapp_business_account`, `page`…); none else. */
export function entriesOf(body: unknown, object: string): Obj[] {
  if (!isObj(body) || body.object !== object) return [];
  return list(body.entry).filter(isObj);
}

/** An entry's `changes[]` (WhatsApp): each change's `field` and its `value` object. */
export function changesOf(entry: Obj): Array<{ field: unknown; value: Obj }> {
  return list(entry.changes).flatMap((change) =>
    isObj(change) && isObj(change.value) ? [{ field: change.field, value: change.value }] : [],
  );
}

/** An entry's `messaging[]` events (Messenger, Instagram). */
export function messagingOf(entry: Obj): Obj[] {
  return list(entry.messaging).filter(isObj);
}

/** WhatsApp's `timestamp`: seconds since the epoch, as a string (or a number). */
export function dateOfSeconds(v: unknown): Date | null {
  const seconds = typeof v === 'string' ? Number(v) : v;
  return typeof seconds === 'number' && Number.isSafeInteger(seconds) && seconds > 0
    ? new Date(seconds * 1000)
    : null;
}

/** Messenger's and Instagram's `timestamp` (and watermarks): milliseconds since the epoch. */
export function dateOfMillis(ms: number | null): Date | null {
  return ms !== null && Number.isSafeInteger(ms) ? new Date(ms) : null;
}

/** A vendor's kind of message or attachment as a label in our text, or `fallback` if odd. */
export function kindLabel(kind: string, fallback: string): string {
  return /^[a-z_]{1,40}$/.test(kind) ? kind : fallback;
}

/** `Location: name (lat, lng)`, from what the payload gave; null when it gave nothing. */
export function locationText(where: string, lat: number | null, lng: number | null): string | null {
  const at = lat !== null && lng !== null ? `${lat}, ${lng}` : null;
  if (!where && !at) return null;
  return `Location: ${[where, at && (where ? `(${at})` : at)].filter(Boolean).join(' ')}`;
}

/** A reaction as the text a person reading the conversation needs. */
export function reactionText(removed: boolean, emoji: string | null): string {
  if (removed) return 'Removed a reaction';
  return emoji ? `Reacted ${emoji} to a message` : 'Reacted to a message';
}
