// The query cache's keys, one per resource: the live stream and the screens agree on them.
import type { Message, Note, Status, View } from './types.js';

export interface MessagePage {
  data: Message[];
  has_more: boolean;
}

export interface NotePage {
  data: Note[];
  has_more: boolean;
}

export const keys = {
  lists: () => ['conversations', 'list'] as const,
  list: (view: View, status: Status, q: string) =>
    ['conversations', 'list', view, status, q] as const,
  contactConversations: (contactId: string) =>
    ['conversations', 'list', 'contact', contactId] as const,
  counts: () => ['conversations', 'counts'] as const,
  conversation: (id: string) => ['conversation', id] as const,
  messages: (id: string) => ['messages', id] as const,
  notes: (id: string) => ['notes', id] as const,
  contact: (id: string) => ['contact', id] as const,
  /** The contacts table: `['contacts', 'list', …]` for every filter and page. */
  contactLists: () => ['contacts', 'list'] as const,
  contactList: (query: Record<string, string | number>) => ['contacts', 'list', query] as const,
  tags: () => ['tags'] as const,
  contactImport: (id: string) => ['contact-import', id] as const,
  users: () => ['users'] as const,
  teams: () => ['teams'] as const,
  templates: () => ['templates'] as const,
  /** The settings screen's list (a status or 'all'); under templates(), so an update refetches it. */
  templateList: (status: string) => ['templates', 'list', status] as const,
  apiKeys: () => ['api-keys'] as const,
  channels: () => ['channels'] as const,
  webhooks: () => ['webhooks'] as const,
  canned: (q: string) => ['canned-responses', q] as const,
  webhook: (id: string) => ['webhooks', id] as const,
  deliveries: (id: string) => ['webhooks', id, 'deliveries'] as const,
  broadcasts: () => ['broadcasts'] as const,
  broadcastList: (page: number) => ['broadcasts', 'list', page] as const,
  broadcast: (id: string) => ['broadcast', id] as const,
  recipients: (id: string, status: string, page: number) =>
    ['broadcast', id, 'recipients', status, page] as const,
  audiencePreview: (channel: string, audience: string) =>
    ['broadcasts', 'preview', channel, audience] as const,
};
