import { Type, type Static } from 'typebox';
import { PageQuery, Timestamp } from '../http/schemas.js';

export const Role = Type.Union([Type.Literal('admin'), Type.Literal('agent')], {
  description:
    '`agent`: works conversations, contacts, messages, notes and canned responses, and reads the rest; `admin`: everything.',
});

export const User = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    email: Type.String(),
    role: Role,
    status: Type.Union([Type.Literal('invited'), Type.Literal('active')], {
      description: '`invited` until the user sets a password by accepting an invite.',
    }),
    created_at: Timestamp,
  },
  { $id: 'User' },
);
export type User = Static<typeof User>;

const InviteFields = {
  invite_url: Type.String({
    description: 'One use; the token after `#token=` is spent by `POST /v1/invites/accept`.',
  }),
  expires_at: Timestamp,
};

export const Invite = Type.Object(InviteFields, { $id: 'Invite' });
export type Invite = Static<typeof Invite>;

export const CreatedUser = Type.Object(
  { ...User.properties, ...InviteFields },
  { $id: 'CreatedUser', description: 'The user, with the invite link that sets their password.' },
);
export type CreatedUser = Static<typeof CreatedUser>;

export const CreateUserBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    email: Type.String({ format: 'email', maxLength: 254, description: 'Unique in the account.' }),
    role: Type.Optional(Role),
  },
  {
    additionalProperties: false,
    examples: [{ name: 'Grace Hopper', email: 'grace@example.com', role: 'agent' }],
  },
);
export type CreateUserBody = Static<typeof CreateUserBody>;

export const UpdateUserBody = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })), role: Type.Optional(Role) },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateUserBody = Static<typeof UpdateUserBody>;

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

const TeamMembers = Type.Array(Type.String(), {
  maxItems: 500,
  description: 'Members; each must exist.',
});

export const CreateTeamBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 255 }), user_ids: Type.Optional(TeamMembers) },
  { additionalProperties: false },
);
export type CreateTeamBody = Static<typeof CreateTeamBody>;

export const UpdateTeamBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    user_ids: Type.Optional(TeamMembers),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateTeamBody = Static<typeof UpdateTeamBody>;

export const ListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });

// Sessions: the inbox app's credential.

const Password = Type.String({ minLength: 1, maxLength: 1024 });
const NewPassword = Type.String({
  minLength: 10,
  maxLength: 1024,
  description: 'At least 10 characters.',
});

export const SignInBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Password,
    account_id: Type.Optional(
      Type.String({
        maxLength: 64,
        description: 'Needed when the email signs in to several accounts.',
      }),
    ),
  },
  {
    additionalProperties: false,
    examples: [{ email: 'ada@example.com', password: 'correct horse battery' }],
  },
);
export type SignInBody = Static<typeof SignInBody>;

export const AcceptInviteBody = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 256 }),
    password: NewPassword,
    name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: "Required for an account's first admin.",
      }),
    ),
    email: Type.Optional(
      Type.String({
        format: 'email',
        maxLength: 254,
        description: "Required for an account's first admin (the setup link).",
      }),
    ),
  },
  {
    additionalProperties: false,
    examples: [
      {
        token: 'V3kq2bX9oN1sYt7LwR4eZc8HmA0pJdF6uGiQyTnKxE5',
        password: 'correct horse battery',
        name: 'Ada Lovelace',
      },
    ],
  },
);
export type AcceptInviteBody = Static<typeof AcceptInviteBody>;

export const ChangePasswordBody = Type.Object(
  { current_password: Password, new_password: NewPassword },
  { additionalProperties: false },
);
export type ChangePasswordBody = Static<typeof ChangePasswordBody>;

export const Session = Type.Object(
  {
    user: User,
    account: Type.Object({
      id: Type.String(),
      name: Type.String(),
      plan: Type.Union([
        Type.Literal('starter'),
        Type.Literal('growth'),
        Type.Literal('enterprise'),
      ]),
    }),
    csrf_token: Type.String({
      description:
        'Sent as `X-CSRF-Token` on every POST, PUT, PATCH and DELETE made with the cookie.',
    }),
  },
  {
    $id: 'Session',
    examples: [
      {
        user: {
          id: 'usr_01J9Z3Q4W7ZK4S5V2N8C6B1XQA',
          name: 'Ada Lovelace',
          email: 'ada@example.com',
          role: 'admin',
          status: 'active',
          created_at: '2026-11-27T09:30:00.000Z',
        },
        account: { id: 'acc_01J9Z3Q4W7ZK4S5V2N8C6B1XQB', name: 'Default', plan: 'growth' },
        csrf_token: 'pQ8sZ1xV4nK7bT2wR9eY5cH0mA3jD6fL8uG1iO4tN7k',
      },
    ],
  },
);
export type Session = Static<typeof Session>;
