// The account's live event stream, read in one place: each event patches or invalidates the
// query cache, so every screen follows the account without polling or reloading.
import type { InfiniteData } from '@tanstack/query-core';
import type { Conversation, LiveEvent, Message, Note, Presence } from '../../api/types.js';
import { queryClient } from '../../lib/query.js';
import { keys, type MessagePage, type NotePage } from '../../api/keys.js';
import { broadcastEvent, type Broadcast } from '../broadcasts/broadcasts-data.js';
import { presenceUpdated } from './presence.js';
import { COMING_EVENTS, STREAM_EVENTS, streamUrl } from './stream-events.js';

/** The conversation on screen: what arrives there is read as it arrives. */
let openConversation: { id: string; markRead: () => void } | null = null;
export function setOpenConversation(open: { id: string; markRead: () => void } | null): void {
  openConversation = open;
}

/** Invalidations wait this long, so that a burst of events costs one refetch. */
const SETTLE_MS = 60;
let pending: Set<string> | null = null;

function invalidateSoon(what: 'lists' | 'counts' | `contact:${string}`) {
  if (!pending) {
    pending = new Set();
    setTimeout(() => {
      const due = pending!;
      pending = null;
      for (const item of due) {
        if (item === 'lists') void queryClient.invalidateQueries({ queryKey: keys.lists() });
        else if (item === 'counts') void queryClient.invalidateQueries({ queryKey: keys.counts() });
        else void queryClient.invalidateQueries({ queryKey: keys.contact(item.slice(8)) });
      }
    }, SETTLE_MS);
  }
  pending.add(what);
}

/** Puts a message in its conversation's loaded history (new at the start; known: replaced). */
function upsertMessage(message: Message): void {
  queryClient.setQueryData<InfiniteData<MessagePage, string | null>>(
    keys.messages(message.conversation_id),
    (old) => {
      if (!old) return old;
      let found = false;
      const pages = old.pages.map((page) => ({
        ...page,
        data: page.data.map((m) => {
          if (m.id !== message.id) return m;
          found = true;
          return { ...m, ...message };
        }),
      }));
      if (!found && pages[0]) pages[0] = { ...pages[0], data: [message, ...pages[0].data] };
      return { ...old, pages };
    },
  );
}

/** Puts a note in its conversation's loaded notes (known: left as it is). */
export function upsertNote(note: Note): void {
  queryClient.setQueryData<InfiniteData<NotePage, string | null>>(
    keys.notes(note.conversation_id),
    (old) => {
      if (!old?.pages[0]) return old;
      if (old.pages.some((p) => p.data.some((n) => n.id === note.id))) return old;
      const [first, ...rest] = old.pages;
      return { ...old, pages: [{ ...first, data: [note, ...first.data] }, ...rest] };
    },
  );
}

export function applyEvent(event: LiveEvent): void {
  const type = event.event;
  if (type === 'presence.updated') {
    presenceUpdated(event.data as Presence);
  } else if (type.startsWith('message.')) {
    const message = event.data as Message;
    upsertMessage(message);
    if (type === 'message.received' && openConversation?.id === message.conversation_id) {
      openConversation.markRead();
    }
    if (type === 'message.received' || type === 'message.created') {
      invalidateSoon('lists');
      invalidateSoon('counts');
    } else {
      // A status moves: the list's preview shows it.
      invalidateSoon('lists');
    }
  } else if (type.startsWith('conversation.')) {
    const conversation = event.data as Conversation;
    queryClient.setQueryData<Conversation>(keys.conversation(conversation.id), (old) =>
      old ? { ...old, ...conversation, messages: old.messages } : old,
    );
    invalidateSoon('lists');
    invalidateSoon('counts');
  } else if (type === 'note.created') {
    upsertNote(event.data as Note);
  } else if (type === 'template.updated') {
    // Its review status moved: every template list (the settings screen, the picker) refetches.
    void queryClient.invalidateQueries({ queryKey: keys.templates() });
  } else if (type.startsWith('broadcast.')) {
    broadcastEvent(event.data as Broadcast);
  } else if (type.startsWith('contact.')) {
    invalidateSoon(`contact:${(event.data as { id: string }).id}`);
    invalidateSoon('lists');
  }
}

let source: EventSource | null = null;

/** Opens the stream (once); EventSource reconnects by itself with Last-Event-ID. */
export function startLive(): () => void {
  if (source) return stopLive;
  source = new EventSource(streamUrl());
  const onMessage = (e: MessageEvent<string>) => {
    try {
      applyEvent({ event: e.type, ...(JSON.parse(e.data) as Omit<LiveEvent, 'event'>) });
    } catch {
      // A line the app does not understand is not worth breaking the stream for.
    }
  };
  // Named SSE events arrive by name only: listen to those the app reads.
  for (const type of [...STREAM_EVENTS, ...COMING_EVENTS]) {
    source.addEventListener(type, onMessage as EventListener);
  }
  source.addEventListener('end', () => {
    // The session ended (or the stream's day is over): check which.
    stopLive();
    document.dispatchEvent(new Event('switchboard:stream-ended'));
  });
  // After a gap (the stream reconnected), what was missed is refetched.
  source.addEventListener('open', () => {
    invalidateSoon('lists');
    invalidateSoon('counts');
  });
  return stopLive;
}

export function stopLive(): void {
  source?.close();
  source = null;
}
