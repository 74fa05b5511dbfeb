import { Type } from 'typebox';
import { Nullable, Timestamp } from '../http/schemas.js';

/** A key as issued: the only time the key itself is shown. */
export const ApiKey = Type.Object(
  {
    id: Type.String(),
    api_key: Type.String({ description: 'Shown only in this response; only its hash is kept.' }),
    name: Nullable(Type.String()),
    created_at: Timestamp,
  },
  { $id: 'ApiKey' },
);

/** A live key as listed, without the key. */
export const ApiKeySummary = Type.Object(
  { id: Type.String(), name: Nullable(Type.String()), created_at: Timestamp },
  { $id: 'ApiKeySummary' },
);

export const CreateApiKeyBody = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) },
  { additionalProperties: false },
);
