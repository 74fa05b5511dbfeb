import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import type { ErrorDetail } from '../errors.js';

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

function makeAjv(coerceTypes: boolean | 'array'): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    useDefaults: true,
    removeAdditional: false, // unknown fields are errors, never silently dropped
    allErrors: true, // every bad field at once; describeValidation keeps one issue per field
    strict: false,
  });
  addFormats(ajv, ['email', 'uri']);
  ajv.addFormat('date-time', { type: 'string', validate: isExistingDateTime });
  return ajv;
}

const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/** The instants a date-time may name: those whose UTC form has a four-digit year. */
export const EARLIEST_DATE_TIME = '0001-01-01T00:00:00Z';
export const LATEST_DATE_TIME = '9999-12-31T23:59:59.999Z';
const EARLIEST_S = Date.parse(EARLIEST_DATE_TIME) / 1000;
const LATEST_S = Math.floor(Date.parse(LATEST_DATE_TIME) / 1000);
const LATEST_NS = 999_000_000;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * RFC 3339 date-times that name a real instant: offsets written `±hh:mm` (not `+05`), no 30
 * February, no leap second (JavaScript dates and PostgreSQL disagree on what 23:59:60 is), and
 * an instant from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z once the offset is applied:
 * beyond, its UTC form has no four-digit year (`+010000-01-01…`), which our responses and
 * PostgreSQL cannot write back as it came.
 */
export function isExistingDateTime(value: string): boolean {
  const m = DATE_TIME.exec(value);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month))
    return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  if (m[8] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return false;
  // Whole seconds and nanoseconds apart: a millisecond number would round a fraction such as
  // .9999 of the last second down into range, where PostgreSQL rounds it up out of it.
  const ms = Date.parse(m[7] === undefined ? value : value.replace(`.${m[7]}`, ''));
  if (!Number.isFinite(ms)) return false;
  const s = ms / 1000;
  const ns = Number((m[7] ?? '').padEnd(9, '0'));
  return s >= EARLIEST_S && (s < LATEST_S || (s === LATEST_S && ns <= LATEST_NS));
}

// Bodies are JSON and must have the right types; query strings and paths are text and are coerced.
const bodyAjv = makeAjv(false);
const textAjv = makeAjv('array');

/**
 * A string format a feature defines (a contact's `e164` phone), checked by the schema with every
 * other rule so that its failure is reported together with theirs. Call before routes compile.
 */
export function addStringFormat(name: string, validate: (value: string) => boolean): void {
  for (const ajv of [bodyAjv, textAjv]) ajv.addFormat(name, { type: 'string', validate });
}

export const validatorCompiler: FastifySchemaCompiler<object> = ({ schema, httpPart }) => {
  const ajv = httpPart === 'body' ? bodyAjv : textAjv;
  return ajv.compile(schema);
};

/**
 * Ajv reports a failed `anyOf` (a literal union, a nullable field, a union of value types) as one
 * error per branch followed by "must match a schema in anyOf". A client needs one issue: the
 * values or types allowed, or, when the value had the right type but broke a rule of that
 * branch (a maximum, a format), that rule.
 */
function collapseAnyOf(errors: ErrorObject[]): ErrorObject[] {
  const out: ErrorObject[] = [];
  for (const e of errors) {
    if (e.keyword !== 'anyOf') {
      out.push(e);
      continue;
    }
    const prefix = `${e.schemaPath}/`;
    const branches = out.filter((b) => b.schemaPath.startsWith(prefix));
    for (let i = out.length - 1; i >= 0; i--)
      if (out[i]!.schemaPath.startsWith(prefix)) out.splice(i, 1);
    const specific = branches.filter(
      (b) => b.instancePath !== e.instancePath || (b.keyword !== 'type' && b.keyword !== 'const'),
    );
    if (specific.length > 0) {
      out.push(...specific);
      continue;
    }
    const values = branches
      .filter((b) => b.keyword === 'const')
      .map((b) => JSON.stringify((b.params as { allowedValue: unknown }).allowedValue));
    const types = branches
      .filter((b) => b.keyword === 'type')
      .map((b) => String((b.params as { type: string }).type));
    const allowed = [...values.map((v) => v.replace(/^"(.*)"$/, '$1')), ...types];
    const message =
      types.length === 0
        ? `must be one of ${allowed.join(', ')}`
        : `must be ${allowed.slice(0, -1).join(', ')}${allowed.length > 1 ? ' or ' : ''}${allowed.at(-1) ?? 'valid'}`;
    out.push({ ...e, message });
  }
  return out;
}

/** Turns Ajv's findings into `{ field, issue }` pairs named the way the client wrote them. */
export function describeValidation(errors: ErrorObject[], part: string | undefined): ErrorDetail[] {
  const details = collapseAnyOf(errors).map((e) => describeOne(e, part));
  // Several rules of one field can fail together (a format and a maxLength); a client needs one.
  const seen = new Set<string>();
  return details.filter((d) => !seen.has(d.field) && seen.add(d.field));
}

function describeOne(e: ErrorObject, part: string | undefined): ErrorDetail {
  {
    const path = e.instancePath
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .join('.');
    const join = (child: string) => (path ? `${path}.${child}` : child);
    const where = part === 'querystring' ? 'query' : (part ?? 'body');
    switch (e.keyword) {
      case 'additionalProperties': {
        const name = String((e.params as { additionalProperty: string }).additionalProperty);
        return {
          field: join(name),
          issue: `unknown ${where === 'query' ? 'query parameter' : 'field'}`,
        };
      }
      case 'required': {
        const name = String((e.params as { missingProperty: string }).missingProperty);
        return { field: join(name), issue: 'is required' };
      }
      case 'enum': {
        const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
        return { field: path || where, issue: `must be one of ${allowed.map(String).join(', ')}` };
      }
      case 'format': {
        const format = String((e.params as { format: string }).format);
        return {
          field: path || where,
          issue:
            format === 'date-time'
              ? `must be an existing RFC 3339 date-time (offset as ±hh:mm) from ${EARLIEST_DATE_TIME} to ${LATEST_DATE_TIME}`
              : format === 'e164'
                ? 'must be a valid E.164 number such as +14155550123'
                : `must be a valid ${format}`,
        };
      }
      default:
        return { field: path || where, issue: e.message ?? 'is invalid' };
    }
  }
}
