import { Type } from 'typebox';
import { Nullable, Timestamp } from '../http/schemas.js';
import { Invite, Role } from '../users/users.schema.js';

export const Plan = Type.Union([
  Type.Literal('starter'),
  Type.Literal('growth'),
  Type.Literal('enterprise'),
]);
export const RateLimit = Nullable(Type.Integer({ minimum: 1, maximum: 1_000_000 }));

const ACCOUNT_EXAMPLE = {
  id: 'acc_01J9Z3Q4W7ZK4S5V2N8C6B1XQB',
  name: 'Acme',
  plan: 'growth',
  rate_limit_per_minute: null,
  created_at: '2026-11-27T09:30:00.000Z',
};

export const Account = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    plan: Plan,
    rate_limit_per_minute: RateLimit,
    created_at: Timestamp,
  },
  { $id: 'Account', examples: [ACCOUNT_EXAMPLE] },
);

export const AccountPage = Type.Object(
  {
    data: Type.Array(Account),
    total: Type.Integer({ minimum: 0 }),
    page: Type.Integer({ minimum: 1 }),
  },
  { examples: [{ data: [ACCOUNT_EXAMPLE], total: 1, page: 1 }] },
);

export const AccountKeys = Type.Object(
  {
    data: Type.Array(
      Type.Object({ id: Type.String(), name: Nullable(Type.String()), created_at: Timestamp }),
    ),
  },
  {
    description: "The account's live keys, newest first, without the keys.",
    examples: [
      {
        data: [
          {
            id: 'key_01J9Z3Q4W7ZK4S5V2N8C6B1XQC',
            name: 'production',
            created_at: '2026-11-27T09:31:00.000Z',
          },
        ],
      },
    ],
  },
);

export const InviteBody = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 254 }),
    role: Role,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  {
    additionalProperties: false,
    examples: [{ email: 'ada@example.com', role: 'admin', name: 'Ada Lovelace' }],
  },
);

export const AdminInvite = Type.Object(
  { user_id: Type.String(), ...Invite.properties },
  {
    examples: [
      {
        user_id: 'usr_01J9Z3Q4W7ZK4S5V2N8C6B1XQA',
        invite_url:
          'https://inbox.example.com/app/invite#token=V3kq2bX9oN1sYt7LwR4eZc8HmA0pJdF6uGiQyTnKxE5',
        expires_at: '2026-12-04T09:30:00.000Z',
      },
    ],
  },
);

export const DeadJobsQuery = Type.Object(
  {
    account_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: "Only this account's dead jobs." }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1000,
        default: 100,
        description: 'At most this many, newest deaths first.',
      }),
    ),
  },
  { additionalProperties: false },
);

const DEAD_JOB_EXAMPLE = {
  id: 'job_01J9Z3Q4W7ZK4S5V2N8C6B1XQD',
  account_id: 'acc_01J9Z3Q4W7ZK4S5V2N8C6B1XQB',
  kind: 'broadcast.send',
  payload: { v: 1, broadcast_id: 'bc_01J9Z3Q4W7ZK4S5V2N8C6B1XQE' },
  attempts: 6,
  died_at: '2026-11-27T10:02:00.000Z',
  last_error: 'connect ECONNREFUSED 10.0.0.7:443',
  created_at: '2026-11-27T09:40:00.000Z',
};

export const DeadJobList = Type.Object(
  {
    data: Type.Array(
      Type.Object({
        id: Type.String(),
        account_id: Type.String(),
        kind: Type.String(),
        payload: Type.Unknown(),
        attempts: Type.Integer({ minimum: 0 }),
        died_at: Timestamp,
        last_error: Nullable(Type.String()),
        created_at: Timestamp,
      }),
    ),
  },
  { examples: [{ data: [DEAD_JOB_EXAMPLE] }] },
);

export const RetriedJob = Type.Object(
  { id: Type.String(), kind: Type.String(), account_id: Type.String() },
  {
    description: 'The job, back in the queue, due now, with a fresh retry schedule.',
    examples: [
      {
        id: DEAD_JOB_EXAMPLE.id,
        kind: DEAD_JOB_EXAMPLE.kind,
        account_id: DEAD_JOB_EXAMPLE.account_id,
      },
    ],
  },
);
