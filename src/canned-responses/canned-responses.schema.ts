import { Type, type Static } from 'typebox';
import { PageQuery, Timestamp } from '../http/schemas.js';

const Shortcut = Type.String({
  pattern: '^[a-z0-9_-]{1,32}$',
  description:
    'What an agent types after `/`: 1–32 of a–z, 0–9, `_` and `-`; unique in the account.',
});
const Content = Type.String({
  minLength: 1,
  maxLength: 4096,
  description: 'The text inserted, 1–4,096 characters.',
});

export const CannedResponse = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `cr_`.' }),
    shortcut: Type.String(),
    content: Type.String(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'CannedResponse' },
);
export type CannedResponse = Static<typeof CannedResponse>;

export const CreateCannedResponseBody = Type.Object(
  { shortcut: Shortcut, content: Content },
  { additionalProperties: false },
);
export type CreateCannedResponseBody = Static<typeof CreateCannedResponseBody>;

export const UpdateCannedResponseBody = Type.Object(
  { shortcut: Type.Optional(Shortcut), content: Type.Optional(Content) },
  { additionalProperties: false, minProperties: 1, description: 'At least one of the two.' },
);
export type UpdateCannedResponseBody = Static<typeof UpdateCannedResponseBody>;

export const ListCannedResponsesQuery = Type.Object(
  {
    ...PageQuery,
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'Matches the start of a shortcut, or any part of the content (any case).',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListCannedResponsesQuery = Static<typeof ListCannedResponsesQuery>;
