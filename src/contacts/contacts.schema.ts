import { Type, type Static } from 'typebox';
import { Nullable, PageQuery, Timestamp } from '../http/schemas.js';
import { addStringFormat } from '../http/validation.js';
import { isValidE164 } from './phone.js';

export const LIFECYCLE_STAGES = ['lead', 'customer', 'churned'] as const;

const CustomFieldValue = Type.Union([
  Type.String({ maxLength: 2000 }),
  Type.Number(),
  Type.Boolean(),
]);

export const ContactIdentity = Type.Object(
  {
    channel: Type.Enum(['whatsapp', 'instagram', 'messenger', 'webchat']),
    id: Type.String({
      description:
        "The contact's id on the channel: the phone (E.164) on whatsapp, the page-scoped id (PSID) on messenger, the Instagram-scoped id (IGSID) on instagram, the verified identifier on webchat.",
    }),
  },
  { additionalProperties: false },
);
export type ContactIdentity = Static<typeof ContactIdentity>;

export const Contact = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `con_`.' }),
    phone: Nullable(
      Type.String({
        description:
          'E.164. Null for a contact first met on a channel without phone numbers (messenger, instagram, webchat) until a phone is set.',
      }),
    ),
    name: Nullable(Type.String()),
    email: Nullable(Type.String()),
    tags: Type.Array(Type.String()),
    lifecycle_stage: Nullable(Type.Enum(LIFECYCLE_STAGES)),
    custom_fields: Type.Record(Type.String(), CustomFieldValue),
    identities: Type.Array(ContactIdentity, {
      description:
        'Read-only: who the contact is on each channel, at most one per channel; whatsapp is present when the contact has a phone. On a channel connected to a real provider, a contact is reached only through its identity there.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Contact' },
);
export type Contact = Static<typeof Contact>;

addStringFormat('e164', isValidE164);
const Phone = Type.String({
  maxLength: 32,
  format: 'e164',
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

export const MergeContactBody = Type.Object(
  {
    contact_id: Type.String({
      maxLength: 64,
      description: 'The contact folded into this one and then deleted.',
    }),
  },
  { additionalProperties: false },
);
export type MergeContactBody = Static<typeof MergeContactBody>;

export const LifecycleBody = Type.Object(
  {
    lifecycle_stage: Nullable(Type.Enum(LIFECYCLE_STAGES)),
  },
  { additionalProperties: false },
);
export type LifecycleBody = Static<typeof LifecycleBody>;

/** The filters of the contacts list and of its export. */
export const ContactFilterQuery = {
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
  lifecycle_stage: Type.Optional(
    Type.Enum(LIFECYCLE_STAGES, { description: 'Only contacts at this lifecycle stage.' }),
  ),
  channel: Type.Optional(
    Type.Enum(['whatsapp', 'instagram', 'messenger', 'webchat'], {
      description: 'Only contacts with a conversation on this channel.',
    }),
  ),
};

export const ListContactsQuery = Type.Object(
  { ...PageQuery, ...ContactFilterQuery },
  { additionalProperties: false },
);
export type ListContactsQuery = Static<typeof ListContactsQuery>;

export const Tag = Type.Object({ name: Type.String(), created_at: Timestamp }, { $id: 'Tag' });
export type Tag = Static<typeof Tag>;

export const ListTagsQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
