// Who else is on a conversation: presence.updated events, kept until they expire. Not server
// data to cache: it is never stored, only seen go by.
import { useEffect, useState } from 'preact/hooks';
import type { Presence } from '../../api/types.js';

const byConversation = new Map<string, Map<string, Presence>>();
const listeners = new Set<() => void>();
let selfId: string | null = null;

export function setPresenceSelf(userId: string | null): void {
  selfId = userId;
}

/**
 * Called when someone arrives on a conversation (not there, or expired, until now): the open
 * conversation answers with its own presence, so that a newcomer sees at once who is already
 * there instead of at their next 15-second beat.
 */
let onArrival: ((conversationId: string) => void) | null = null;
export function whenSomeoneArrives(callback: ((conversationId: string) => void) | null): void {
  onArrival = callback;
}

export function presenceUpdated(presence: Presence): void {
  if (presence.user.id === selfId) return;
  let users = byConversation.get(presence.conversation_id);
  if (!users) byConversation.set(presence.conversation_id, (users = new Map<string, Presence>()));
  const before = users.get(presence.user.id);
  users.set(presence.user.id, presence);
  if (!before || new Date(before.expires_at).getTime() <= Date.now()) {
    onArrival?.(presence.conversation_id);
  }
  for (const l of listeners) l();
}

function current(conversationId: string): Presence[] {
  const now = Date.now();
  return [...(byConversation.get(conversationId)?.values() ?? [])].filter(
    (p) => new Date(p.expires_at).getTime() > now,
  );
}

/** Others on this conversation now, refreshed as events come and as they expire. */
export function usePresence(conversationId: string): Presence[] {
  const [list, setList] = useState(() => current(conversationId));
  useEffect(() => {
    const update = () => setList(current(conversationId));
    update();
    listeners.add(update);
    const timer = setInterval(update, 5_000);
    return () => {
      listeners.delete(update);
      clearInterval(timer);
    };
  }, [conversationId]);
  return list;
}
