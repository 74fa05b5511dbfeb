import type { MessageRow } from './messages.repository.js';
import type { Message } from './messages.schema.js';

export function toMessage(row: MessageRow): Message {
  return {
    id: row.id,
    conversation_id: row.conversation_id,
    direction: row.direction,
    type: row.type,
    content: row.content,
    media_url: row.media_url,
    status: row.status,
    failure_reason: row.failure_reason,
    // Rows read before migration 023 (or by a statement that lists its columns) have none.
    author: row.author ?? null,
    created_at: row.created_at.toISOString(),
  };
}
