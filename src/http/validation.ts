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
    allErrors: false,
    strict: false,
  });
  addFormats(ajv, ['email', 'date-time', 'uri']);
  return ajv;
}

// Bodies are JSON and must have the right types; query strings and paths are text and are coerced.
const bodyAjv = makeAjv(false);
const textAjv = makeAjv('array');

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
  return collapseAnyOf(errors).map((e) => {
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
      case 'format':
        return {
          field: path || where,
          issue: `must be a valid ${String((e.params as { format: string }).format)}`,
        };
      default:
        return { field: path || where, issue: e.message ?? 'is invalid' };
    }
  });
}
