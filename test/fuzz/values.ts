import fc from 'fast-check';

/**
 * Generated values are plain JSON values that may hold tokens: parts that are only known when the
 * request runs (an id the run has created by then, a phone not yet used, a time ahead of the
 * clock) or that JSON.stringify cannot write (`1e999`, a body nested 10,000 deep). A run is
 * reproducible from its seed because a token names its choice by index, not by value.
 */
export type Token =
  | { $token: 'id'; prefixes: readonly string[]; n: number }
  | { $token: 'raw'; text: string; label: string; bytes?: boolean }
  | { $token: 'phone'; n: number }
  | { $token: 'template_name'; n: number }
  | { $token: 'future'; minutes: number };

export const isToken = (v: unknown): v is Token =>
  typeof v === 'object' && v !== null && '$token' in v;

export const idToken = (prefixes: readonly string[], n: number): Token => ({
  $token: 'id',
  prefixes,
  n,
});
export const raw = (text: string, label = text): Token => ({ $token: 'raw', text, label });
/** A body sent as these bytes (latin1: one byte a character), not as UTF-8 text: invalid UTF-8. */
export const rawBytes = (text: string, label: string): Token => ({
  $token: 'raw',
  text,
  label,
  bytes: true,
});

/** The hostile strings: control characters, lone surrogates, very long, look-alikes of syntax. */
export const hostileStrings: readonly string[] = [
  '\u0000',
  'a\u0000b',
  'tag\u0000',
  '\u0001\u0002\u0003',
  '\u0007\b\t\n\u000b\f\r',
  '\u001b[31m',
  '\u007f',
  '\u0085',
  '\u2028\u2029',
  '\ud800',
  'x\udfffy',
  '\udbff\udfff',
  '\ufeff',
  '\u202e',
  '\ufffe\uffff',
  '😀👩‍👩‍👧',
  'ü',
  '',
  ' ',
  '   padded   ',
  '%00',
  '../..',
  "' OR 1=1 --",
  '{{1}}',
  '<script>',
  '\\',
  '"',
  'null',
  'x'.repeat(300),
  'y'.repeat(5_000),
  'z'.repeat(200_000),
];

/** Date-times the format may accept but that do not exist, or that sit at the edges. */
export const hostileDateTimes: readonly string[] = [
  '2026-02-30T00:00:00Z',
  '2027-02-29T12:00:00Z',
  '2026-12-31T23:59:60Z',
  '2030-06-30T23:59:60Z',
  '2030-06-01T10:00:00+05',
  '2030-06-01T10:00:00+0500',
  '2030-06-01T10:00:00+24:00',
  '2030-06-01T24:00:00Z',
  '2030-13-01T00:00:00Z',
  '2030-00-10T00:00:00Z',
  '2030-06-01T10:00:00',
  '2030-06-01',
  '9999-12-31T23:59:59Z',
  '9999-12-31T23:59:59.999Z',
  // In the format, but past year 9999 (or before year 1) once the offset is applied.
  '9999-12-31T23:59:59.999-00:01',
  '9999-12-31T23:59:59-23:59',
  '9999-12-31T23:59:59.9995Z',
  '0001-01-01T00:00:00Z',
  '0001-01-01T00:00:00+00:01',
  '0001-01-01T00:00:00.000+23:59',
  '0000-01-01T00:00:00Z',
  '+275760-09-13T00:00:00Z',
  '2030-06-01T10:00:00.123456789Z',
  '2030-06-01t10:00:00z',
  '2030-06-01T10:00:00\u0000Z',
];

/** Raw JSON number text JSON.stringify cannot write, and numbers at the edges. */
export const hostileNumbers: readonly (number | Token)[] = [
  raw('1e999'),
  raw('-1e400'),
  raw('1e-400'),
  raw('123456789012345678901234567890'),
  raw('-0'),
  raw('1E+2'),
  0,
  -1,
  1.5,
  -1e308,
  1e308,
  2 ** 53 + 2,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_VALUE,
];

export function nested(depth: number, kind: 'array' | 'object'): Token {
  const text =
    kind === 'array'
      ? '['.repeat(depth) + ']'.repeat(depth)
      : '{"a":'.repeat(depth) + '{}' + '}'.repeat(depth);
  return raw(text, `<${kind} nested ${depth} deep>`);
}

export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constantFrom(...hostileStrings), weight: 6 },
  { arbitrary: fc.constantFrom(...hostileNumbers), weight: 3 },
  { arbitrary: fc.constantFrom(...hostileDateTimes), weight: 2 },
  {
    arbitrary: fc.constantFrom<unknown>(null, true, false, [], {}, [null], { a: 1 }, ['x'], 42),
    weight: 3,
  },
  {
    arbitrary: fc
      .tuple(fc.constantFrom(33, 200, 10_000), fc.constantFrom('array' as const, 'object' as const))
      .map(([d, k]) => nested(d, k)),
    weight: 1,
  },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 20 }), weight: 2 },
);

/** Writes a generated value as JSON text, tokens resolved by `resolve`. */
export function serialize(value: unknown, resolve: (t: Token) => unknown): string {
  if (isToken(value)) {
    if (value.$token === 'raw') return value.text;
    return serialize(resolve(value), resolve);
  }
  if (Array.isArray(value)) return `[${value.map((v) => serialize(v, resolve)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${serialize(v, resolve)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** A value as text for a query string or a path: tokens resolved, everything else as written. */
export function asText(value: unknown, resolve: (t: Token) => unknown): string {
  if (isToken(value)) return value.$token === 'raw' ? value.text : asText(resolve(value), resolve);
  if (typeof value === 'string') return value;
  return JSON.stringify(value) ?? '';
}

/** Every path to a value inside a generated body (object keys, array indexes), root excluded. */
export function pathsOf(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (isToken(value)) return [];
  const out: (string | number)[][] = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => out.push([...prefix, i], ...pathsOf(v, [...prefix, i])));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value))
      out.push([...prefix, k], ...pathsOf(v, [...prefix, k]));
  }
  return out;
}

/** A copy of `value` with the value at `path` replaced, or removed when `replacement` is undefined. */
export function setAt(value: unknown, path: (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  if (Array.isArray(value)) {
    const copy = [...value];
    if (rest.length === 0 && replacement === undefined) copy.splice(Number(head), 1);
    else copy[Number(head)] = setAt(copy[Number(head)], rest, replacement);
    return copy;
  }
  const copy = { ...(value as Record<string, unknown>) };
  if (rest.length === 0 && replacement === undefined) delete copy[String(head)];
  else copy[String(head)] = setAt(copy[String(head)], rest, replacement);
  return copy;
}
