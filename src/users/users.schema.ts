import { Type, type Static } from 'typebox';
import { PageQuery, Timestamp } from '../http/schemas.js';

export const User = Type.Object(
  { id: Type.String(), name: Type.String(), email: Type.String(), created_at: Timestamp },
  { $id: 'User' },
);
export type User = Static<typeof User>;

export const CreateUserBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    email: Type.String({ format: 'email', maxLength: 254, description: 'Unique in the account.' }),
  },
  { additionalProperties: false },
);
export type CreateUserBody = Static<typeof CreateUserBody>;

export const Team = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    user_ids: Type.Array(Type.String()),
    created_at: Timestamp,
  },
  { $id: 'Team' },
);
export type Team = Static<typeof Team>;

export const CreateTeamBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    user_ids: Type.Optional(
      Type.Array(Type.String(), { maxItems: 500, description: 'Members; each must exist.' }),
    ),
  },
  { additionalProperties: false },
);
export type CreateTeamBody = Static<typeof CreateTeamBody>;

export const ListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
