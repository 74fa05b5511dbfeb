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
  /** Null for a contact met on a channel without phones (Messenger, Instagram, webchat). */
  phone: string | null;
  name: string | null;
  email: string | null;
  tags: string[];
  lifecycle_stage: string | null;
  custom_fields: Json<Record<string, CustomFieldValue>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** Channels whose people are known by an id of the channel's own; WhatsApp's is the phone. */
export type IdentityChannel = 'instagram' | 'messenger' | 'webchat';

/** A contact's id on a channel without phones (a PSID, an IGSID, a webchat identifier). */
export interface ContactIdentitiesTable {
  account_id: string;
  contact_id: string;
  channel: IdentityChannel;
  external_id: string;
  created_at: Timestamp;
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
  /** The writing transaction's id (xid8, as text); the live stream's order. */
  xid: Generated<string>;
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

export type Channel = 'whatsapp' | 'instagram' | 'messenger' | 'webchat';
export type MessageStatus = 'queued' | 'sent' | 'delivered' | 'read' | 'failed';
export type MessageType = 'text' | 'template' | 'image' | 'document';

export interface UsersTable {
  account_id: string;
  id: string;
  name: string;
  email: string;
  role: Generated<UserRole>;
  password_hash: string | null;
  created_at: Timestamp;
}

export type UserRole = 'admin' | 'agent';

/** Who wrote a message or a note through a session (null: through an API key, or a contact). */
export interface Author {
  type: 'user';
  id: string;
  name: string;
}

export interface InvitesTable {
  token_hash: string;
  account_id: string;
  /** Null for the link that creates an account's first admin. */
  user_id: string | null;
  role: UserRole;
  expires_at: Timestamp;
  created_at: Timestamp;
}

export interface SessionsTable {
  token_hash: string;
  account_id: string;
  user_id: string;
  csrf_token: string;
  created_at: Timestamp;
  last_seen_at: Timestamp;
  expires_at: Timestamp;
}

export interface SignInFailuresTable {
  email: string;
  address: string;
  at: Timestamp;
}

export interface TeamsTable {
  account_id: string;
  id: string;
  name: string;
  user_ids: string[];
  created_at: Timestamp;
}

export type TemplateStatus = 'pending' | 'approved' | 'rejected';

export interface TemplatesTable {
  account_id: string;
  id: string;
  name: string;
  language: string;
  category: string;
  body: string;
  status: TemplateStatus;
  /** Meta's id, for templates submitted to or imported from a WhatsApp Business Account. */
  provider_template_id: string | null;
  rejection_reason: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ConversationsTable {
  account_id: string;
  id: string;
  contact_id: string;
  channel: Channel;
  status: 'open' | 'resolved';
  assignee_type: 'user' | 'team' | null;
  assignee_id: string | null;
  last_inbound_at: Timestamp | null;
  /** When the team last read it; inbound messages after this are unread. */
  last_read_at: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface MessagesTable {
  account_id: string;
  id: string;
  conversation_id: string;
  direction: 'inbound' | 'outbound';
  type: MessageType;
  content: string | null;
  media_url: string | null;
  template_name: string | null;
  template_language: string | null;
  template_params: ColumnType<string[] | null, string | null, string | null>;
  status: MessageStatus;
  failure_reason: string | null;
  provider_message_id: string | null;
  broadcast_id: string | null;
  author: ColumnType<Author | null, string | null, string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface NotesTable {
  account_id: string;
  id: string;
  conversation_id: string;
  content: string;
  author: ColumnType<Author | null, string | null, string | null>;
  created_at: Timestamp;
}

export interface JobsTable {
  account_id: string;
  id: string;
  kind: string;
  payload: Json<unknown>;
  run_at: Timestamp;
  attempts: Generated<number>;
  locked_until: Timestamp | null;
  last_error: string | null;
  created_at: Timestamp;
  /** Set when its retries ran out: kept (and skipped by claims) until retried or deleted. */
  dead_at: Timestamp | null;
  /** Its retries ran out but settling it failed: it comes back to be settled, not to run. */
  settling: Generated<boolean>;
  /**
   * A send job's messages (ids in text order up to this) that its attempt may have handed to
   * the provider: '' none, NULL every one (migration 040).
   */
  handed_upto: string | null;
  /** Of those, the ones the provider answered "not now" meanwhile (migration 040). */
  not_taken: string[] | null;
}

export interface WebhooksTable {
  account_id: string;
  id: string;
  url: string;
  events: string[];
  /** The signing secret sealed under SECRETS_KEY (see WebhookSecrets); never stored in clear. */
  secret_box: Buffer;
  status: 'active' | 'disabled';
  disabled_reason: string | null;
  /** When the first of an unbroken run of failed attempts happened; null after a success. */
  failing_since: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface WebhookDeliveriesTable {
  account_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: Generated<number>;
  next_attempt_at: Timestamp;
  locked_until: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface WebhookAttemptsTable {
  account_id: string;
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  created_at: Timestamp;
  /** The start of the receiver's answer (at most 500 characters); null when none came. */
  response_excerpt: string | null;
  /** When the retry this attempt's failure scheduled is due; null when none is. */
  next_attempt_at: Timestamp | null;
}

export type BroadcastStatus = 'draft' | 'scheduled' | 'sending' | 'sent' | 'failed';

export interface BroadcastAudience {
  tags?: string[];
  lifecycle_stage?: string;
  all?: boolean;
}

export interface BroadcastMessage {
  type: 'text' | 'template';
  content?: string;
  template_name?: string;
  template_params?: string[];
}

/** When a batch may next start on an account's channel (paced broadcasts share the rate). */
export interface ChannelPacingTable {
  account_id: string;
  channel: Channel;
  next_at: Timestamp;
}

export interface BroadcastsTable {
  account_id: string;
  id: string;
  name: string;
  channel: Channel;
  audience: Json<BroadcastAudience>;
  message: Json<BroadcastMessage>;
  status: BroadcastStatus;
  scheduled_at: Timestamp | null;
  started_at: Timestamp | null;
  completed_at: Timestamp | null;
  /** When the last recipient was queued; the broadcast ends once none of its messages is queued. */
  audience_done_at: Timestamp | null;
  rendered_content: string | null;
  failure_reason: string | null;
  cursor: string | null;
  sent: Generated<number>;
  delivered: Generated<number>;
  read: Generated<number>;
  replied: Generated<number>;
  failed: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** When the last `broadcast.updated` was recorded (at most one a second; migration 031). */
  progress_event_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface BroadcastRecipientsTable {
  account_id: string;
  broadcast_id: string;
  contact_id: string;
  conversation_id: string | null;
  message_id: string | null;
  failure_reason: string | null;
  replied_at: Timestamp | null;
  created_at: Timestamp;
}

/**
 * Added to the counts in `broadcasts` (see migration 013): one row per broadcast and slot, a slot
 * per database connection, so that concurrent transactions add to different rows.
 */
export interface BroadcastCountersTable {
  account_id: string;
  broadcast_id: string;
  slot: number;
  sent: Generated<number>;
  delivered: Generated<number>;
  read: Generated<number>;
  replied: Generated<number>;
  failed: Generated<number>;
}

/** Conversations by status, channel and assignee, kept by triggers (migration 028). */
/** Contacts by lifecycle stage (migration 034); a count is the sum of its slots. */
/** Contacts with a conversation on a channel, by connection slot (migration 039). */
export interface ContactChannelCountsTable {
  account_id: string;
  channel: Channel;
  slot: number;
  /** bigint: a string as pg reads it. */
  n: string;
}

export interface ContactCountsTable {
  account_id: string;
  /** '' when the contact has no stage. */
  lifecycle_stage: string;
  slot: number;
  /** bigint: a string as pg reads it. */
  n: string;
}

/** Contacts holding a tag, by lifecycle stage (migration 034). */
export interface ContactTagCountsTable {
  account_id: string;
  tag: string;
  /** '' when the contact has no stage. */
  lifecycle_stage: string;
  slot: number;
  n: string;
}

export interface ConversationCountsTable {
  account_id: string;
  status: 'open' | 'resolved';
  channel: string;
  /** '' when unassigned. */
  assignee_type: string;
  /** '' when unassigned. */
  assignee_id: string;
  slot: number;
  /** bigint: a string as pg reads it. */
  n: string;
}

export type ConnectionProvider = 'whatsapp_cloud' | 'messenger' | 'instagram' | 'webchat';

export interface ChannelConnectionsTable {
  account_id: string;
  id: string;
  channel: Channel;
  provider: ConnectionProvider;
  status: 'active' | 'error';
  /** The provider's last refusal of the credentials. */
  error: string | null;
  /** What the API shows: ids, names and options; never a secret. */
  settings: Json<Record<string, unknown>>;
  /** The secrets as one AES-256-GCM box (see SecretBox); null for providers without any. */
  secrets: Buffer | null;
  verify_token: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface InboundWebhooksTable {
  account_id: string;
  id: string;
  connection_id: string;
  /** The exact bytes received, as signed. */
  body: Buffer;
  received_at: Timestamp;
  processed_at: Timestamp | null;
}

/** Another provider id of a message (a captioned attachment's caption, sent apart on Meta's pages). */
export interface ProviderIdAliasesTable {
  account_id: string;
  /** The other provider id (the caption's message id). */
  alias: string;
  /** The provider id of the message it names (messages.provider_message_id). */
  provider_message_id: string;
  created_at: Timestamp;
}

export interface MediaTable {
  account_id: string;
  id: string;
  content_type: string;
  filename: string | null;
  size: number;
  bytes: Buffer;
  created_at: Timestamp;
}

export interface WebchatVisitorsTable {
  account_id: string;
  id: string;
  /** The site's identifier of a verified visitor (Switchboard.identify). */
  identifier: string | null;
  /**
   * SHA-256 of the webchat connection's sealed secrets when the identifier was verified: it
   * counts only while the connection still holds them (see WebchatRepository.findVisitor).
   */
  vouched_by: Buffer | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CannedResponsesTable {
  account_id: string;
  id: string;
  shortcut: string;
  content: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface Tables {
  canned_responses: CannedResponsesTable;
  webchat_visitors: WebchatVisitorsTable;
  channel_connections: ChannelConnectionsTable;
  inbound_webhooks: InboundWebhooksTable;
  provider_id_aliases: ProviderIdAliasesTable;
  media: MediaTable;
  broadcasts: BroadcastsTable;
  channel_pacing: ChannelPacingTable;
  broadcast_recipients: BroadcastRecipientsTable;
  broadcast_counters: BroadcastCountersTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  users: UsersTable;
  invites: InvitesTable;
  sessions: SessionsTable;
  sign_in_failures: SignInFailuresTable;
  teams: TeamsTable;
  templates: TemplatesTable;
  conversations: ConversationsTable;
  conversation_counts: ConversationCountsTable;
  contact_counts: ContactCountsTable;
  contact_channel_counts: ContactChannelCountsTable;
  contact_tag_counts: ContactTagCountsTable;
  messages: MessagesTable;
  notes: NotesTable;
  jobs: JobsTable;
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  contacts: ContactsTable;
  contact_identities: ContactIdentitiesTable;
  tags: TagsTable;
  events: EventsTable;
  idempotency_keys: IdempotencyKeysTable;
}
