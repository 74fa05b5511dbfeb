import { Type, type Static } from 'typebox';
import { Nullable, PageQuery, Timestamp } from '../http/schemas.js';

export const TEMPLATE_CATEGORIES = ['marketing', 'utility', 'authentication'] as const;
export const TEMPLATE_STATUSES = ['pending', 'approved', 'rejected'] as const;

export const Template = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    language: Type.String(),
    category: Type.Enum(TEMPLATE_CATEGORIES),
    body: Type.String(),
    status: Type.Enum(TEMPLATE_STATUSES),
    rejection_reason: Nullable(Type.String(), {
      description:
        "Meta's reason for rejecting the template, as Meta words it (`INCORRECT_CATEGORY`, " +
        '`INVALID_FORMAT`…); `null` unless `status` is `rejected` and Meta gave one (the ' +
        "sandbox's review gives none).",
    }),
    created_at: Timestamp,
  },
  { $id: 'Template' },
);
export type Template = Static<typeof Template>;

export const CreateTemplateBody = Type.Object(
  {
    name: Type.String({
      pattern: '^[a-z0-9_]{1,512}$',
      description: 'a-z, 0-9 and _; unique in the account.',
    }),
    language: Type.Optional(
      Type.String({ pattern: '^[a-z]{2,3}(_[A-Z]{2})?$', description: 'Default `en`.' }),
    ),
    category: Type.Optional(Type.Enum(TEMPLATE_CATEGORIES, { description: 'Default `utility`.' })),
    body: Type.String({
      minLength: 1,
      maxLength: 1024,
      description: 'Text with placeholders {{1}}, {{2}}, … numbered from 1 without gaps.',
    }),
  },
  { additionalProperties: false },
);
export type CreateTemplateBody = Static<typeof CreateTemplateBody>;

export const ReviewTemplateBody = Type.Object(
  { status: Type.Union([Type.Literal('approved'), Type.Literal('rejected')]) },
  { additionalProperties: false },
);
export type ReviewTemplateBody = Static<typeof ReviewTemplateBody>;

export const ListTemplatesQuery = Type.Object(
  {
    ...PageQuery,
    status: Type.Optional(
      Type.Enum(TEMPLATE_STATUSES, { description: 'Only templates in this status.' }),
    ),
  },
  { additionalProperties: false },
);

export const SyncTemplatesResult = Type.Object(
  {
    created: Type.Integer({ description: 'Templates imported from Meta that were new here.' }),
    updated: Type.Integer({
      description: "Templates whose status, body or category became Meta's.",
    }),
    unchanged: Type.Integer(),
    skipped: Type.Array(
      Type.Object({ name: Type.String(), language: Type.String(), reason: Type.String() }),
      { description: 'Templates of Meta that were not imported, and why.' },
    ),
  },
  { $id: 'SyncTemplatesResult' },
);
export type SyncTemplatesResult = Static<typeof SyncTemplatesResult>;
