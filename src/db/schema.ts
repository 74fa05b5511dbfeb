import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type Json<T> = ColumnType<T, string, string>;

export type Plan = 'starter' | 'growth' | 'enterprise';

export interface AccountsTable {
  id: string;
  name: string;
  plan: Plan;
  rate_limit_per_minute: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ApiKeysTable {
  account_id: string;
  id: string;
  name: string | null;
  key_hash: string;
  created_at: Timestamp;
  revoked_at: Timestamp | null;
}

export type CustomFieldValue = string | number | boolean;

export interface ContactsTable {
  account_id: string;
  id: string;
  phone: string;
  name: string | null;
  email: string | null;
  tags: string[];
  lifecycle_stage: string | null;
  custom_fields: Json<Record<string, CustomFieldValue>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface TagsTable {
  account_id: string;
  name: string;
  created_at: Timestamp;
}

export interface EventsTable {
  account_id: string;
  id: string;
  seq: Generated<string>;
  type: string;
  data: Json<unknown>;
  created_at: Timestamp;
}

export interface IdempotencyKeysTable {
  account_id: string;
  method: string;
  path: string;
  key: string;
  request_hash: string;
  state: 'running' | 'completed';
  response_status: number | null;
  response_body: string | null;
  created_at: Timestamp;
  locked_at: Timestamp;
}

export interface Tables {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  contacts: ContactsTable;
  tags: TagsTable;
  events: EventsTable;
  idempotency_keys: IdempotencyKeysTable;
}
