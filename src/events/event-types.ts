import type { Contact } from '../contacts/contacts.schema.js';

/** Event name → the shape of its `data` (the resource as the API returns it). */
export interface EventPayloads {
  'contact.created': Contact;
  'message.received': unknown;
  'message.delivered': unknown;
  'message.read': unknown;
  'conversation.assigned': unknown;
  'conversation.resolved': unknown;
  'broadcast.completed': unknown;
}

export type EventType = keyof EventPayloads;

export const EVENT_TYPES = [
  'message.received',
  'message.delivered',
  'message.read',
  'conversation.assigned',
  'conversation.resolved',
  'contact.created',
  'broadcast.completed',
] as const satisfies readonly EventType[];
