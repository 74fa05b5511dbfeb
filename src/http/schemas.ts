import { Type, type TSchema } from 'typebox';

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Optional(
        Type.Array(Type.Object({ field: Type.String(), issue: Type.String() })),
      ),
      request_id: Type.Optional(Type.String()),
      accounts: Type.Optional(
        Type.Array(Type.Object({ id: Type.String(), name: Type.String() }), {
          description: 'On a sign-in `409`: the accounts the email and password open.',
        }),
      ),
    }),
  },
  { $id: 'Error', description: 'The error envelope every failure answers with.' },
);

/** Pages beyond this are refused: their offset would overflow long before any data ran out. */
export const MAX_PAGE = 10_000_000;

export const PageQuery = {
  page: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_PAGE,
      default: 1,
      description: 'Page number, from 1 to 10,000,000; a page past the end is empty.',
    }),
  ),
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size, at most 100.' }),
  ),
};

export function Page<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    total: Type.Integer({ minimum: 0 }),
    page: Type.Integer({ minimum: 1 }),
  });
}

export const IdParams = Type.Object({ id: Type.String() });

/** For routes that take no query parameters: any given is an unknown parameter (422). */
export const NoQuery = Type.Object({}, { additionalProperties: false });

export const Success = Type.Object({ success: Type.Literal(true) });

export const Timestamp = Type.String({ format: 'date-time' });

/** Nullable field, written as an OpenAPI 3.1 type union. */
export function Nullable<T extends TSchema>(schema: T, options?: { description?: string }) {
  return Type.Union([schema, Type.Null()], options);
}

/** A reference to the shared error envelope (registered once with `app.addSchema`). */
export const ErrorRef = Type.Ref('Error');

/** The error responses every authenticated route may answer with, for the OpenAPI document. */
export function errorResponses(...statuses: number[]) {
  const out: Record<number, typeof ErrorRef> = {};
  for (const status of [401, 403, 429, ...statuses]) out[status] = ErrorRef;
  return out;
}

/** Who wrote a message or a note through the inbox; null through an API key (or a contact). */
export const AuthorSchema = Type.Union(
  [
    Type.Object({ type: Type.Literal('user'), id: Type.String(), name: Type.String() }),
    Type.Null(),
  ],
  { description: 'The signed-in user who wrote it; `null` through an API key, and for inbound.' },
);
