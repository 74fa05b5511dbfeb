import type { Broadcast } from '../broadcasts/broadcasts.schema.js';
import type { Contact } from '../contacts/contacts.schema.js';
import type { Conversation, Note } from '../conversations/conversations.schema.js';
import type { Message } from '../messages/messages.schema.js';
import type { Template } from '../templates/templates.schema.js';

/** Event name → the shape of its `data` (the resource as the API returns it). */
export interface EventPayloads {
  'contact.created': Contact;
  /** Beyond SPEC.md: a contact changed (edited, its stage set, merged into, named by a provider). */
  'contact.updated': Contact;
  /** Beyond SPEC.md: a note written in a conversation (for the team only). */
  'note.created': Note;
  'message.received': Message;
  /** Beyond SPEC.md: an outbound message stored (queued), whoever sent it. */
  'message.created': Message;
  'message.delivered': Message;
  'message.read': Message;
  /** Beyond SPEC.md: the provider refused the message for good, or reported it undeliverable. */
  'message.failed': Message;
  'conversation.assigned': Conversation;
  'conversation.resolved': Conversation;
  /** Beyond SPEC.md: a resolved conversation opened again through the API. */
  'conversation.reopened': Conversation;
  /** Beyond SPEC.md: a conversation's assignee removed. */
  'conversation.unassigned': Conversation;
  /** Beyond SPEC.md: the team read what was unread in it. */
  'conversation.read': Conversation;
  'broadcast.completed': Broadcast;
  /** Beyond SPEC.md: a template changed, its review status included (Meta's webhook, a sync, the sandbox). */
  'template.updated': Template;
  /** Beyond SPEC.md: a broadcast's progress while it sends, at most once a second per broadcast. */
  'broadcast.updated': Broadcast;
}

export type EventType = keyof EventPayloads;

export const EVENT_TYPES = [
  'message.received',
  'message.created',
  'message.delivered',
  'message.read',
  'message.failed',
  'conversation.assigned',
  'conversation.resolved',
  'conversation.reopened',
  'conversation.unassigned',
  'conversation.read',
  'contact.created',
  'contact.updated',
  'note.created',
  'broadcast.completed',
  'template.updated',
  'broadcast.updated',
] as const satisfies readonly EventType[];

/**
 * Sent only to the one webhook it is asked for (`POST /v1/webhooks/{id}/test`), whatever that
 * webhook subscribes to: not subscribable (so not in EVENT_TYPES), not on the live stream.
 */
export const WEBHOOK_TEST_EVENT = 'webhook.test';

/** A `webhook.test` event's `data`. */
export interface WebhookTestPayload {
  webhook_id: string;
  message: string;
}

/** What a live stream may carry: every event, and presence (streams only: never stored). */
export const STREAM_EVENT_TYPES = [...EVENT_TYPES, 'presence.updated'] as const;
