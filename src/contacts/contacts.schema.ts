import { Type, type Static } from 'typebox';
import { Nullable, PageQuery, Timestamp } from '../http/schemas.js';

export const LIFECYCLE_STAGES = ['lead', 'customer', 'churned'] as const;

const CustomFieldValue = Type.Union([
  Type.String({ maxLength: 2000 }),
  Type.Number(),
  Type.Boolean(),
]);

export const Contact = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `con_`.' }),
    phone: Type.String({ description: 'E.164.' }),
    name: Nullable(Type.String()),
    email: Nullable(Type.String()),
    tags: Type.Array(Type.String()),
    lifecycle_stage: Nullable(Type.String()),
    custom_fields: Type.Record(Type.String(), CustomFieldValue),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Contact' },
);
export type Contact = Static<typeof Contact>;

const Phone = Type.String({
  maxLength: 32,
  description: 'E.164, e.g. +14155550123. Unique in the account.',
});
const Name = Type.String({ minLength: 1, maxLength: 255 });
const Email = Type.String({ format: 'email', maxLength: 254 });
const Tags = Type.Array(Type.String({ maxLength: 200 }), {
  maxItems: 50,
  description: 'Trimmed, 1–64 characters each, de-duplicated; at most 50.',
});

export const CreateContactBody = Type.Object(
  {
    phone: Phone,
    name: Type.Optional(Nullable(Name)),
    email: Type.Optional(Nullable(Email)),
    tags: Type.Optional(Tags),
    custom_fields: Type.Optional(
      Type.Record(Type.String(), CustomFieldValue, {
        maxProperties: 100,
        description: 'Keys: 1–64 characters of a-z, 0-9, _. Values: string, number or boolean.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateContactBody = Static<typeof CreateContactBody>;

export const UpdateContactBody = Type.Object(
  {
    phone: Type.Optional(Phone),
    name: Type.Optional(Nullable(Name)),
    email: Type.Optional(Nullable(Email)),
    tags: Type.Optional(Tags),
    custom_fields: Type.Optional(
      Type.Record(Type.String(), Nullable(CustomFieldValue), {
        maxProperties: 100,
        description: 'Merged into the existing fields; a key set to null is removed.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type UpdateContactBody = Static<typeof UpdateContactBody>;

export const LifecycleBody = Type.Object(
  {
    lifecycle_stage: Nullable(Type.Enum(LIFECYCLE_STAGES)),
  },
  { additionalProperties: false },
);
export type LifecycleBody = Static<typeof LifecycleBody>;

export const ListContactsQuery = Type.Object(
  {
    ...PageQuery,
    tag: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'Only contacts having this tag.' }),
    ),
    search: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: 'Case-insensitive partial match on name or phone; % and _ match literally.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListContactsQuery = Static<typeof ListContactsQuery>;

export const Tag = Type.Object({ name: Type.String(), created_at: Timestamp }, { $id: 'Tag' });
export type Tag = Static<typeof Tag>;

export const ListTagsQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
