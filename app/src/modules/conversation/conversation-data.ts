import type { InfiniteData } from '@tanstack/query-core';
import { api, data } from '../../api/client.js';
import { keys, type MessagePage, type NotePage } from '../../api/keys.js';
import type { Conversation, Message, Upload } from '../../api/types.js';
import { queryClient, useInfiniteQuery, useQuery } from '../../lib/query.js';
import { upsertNote } from '../live/live.js';

const HISTORY_PAGE = 50;

/**
 * The open conversation. Opening it marks it read (POST /read), whose answer is the
 * conversation without its history: the single read would bring every message, and a
 * conversation of 100,000 messages must open at once.
 */
export function useConversation(id: string) {
  return useQuery<Conversation>({
    queryKey: keys.conversation(id),
    queryFn: () => markRead(id),
    staleTime: Infinity,
  });
}

export async function markRead(id: string): Promise<Conversation> {
  const conversation = await data(
    api.POST('/v1/conversations/{id}/read', { params: { path: { id } } }),
  );
  void queryClient.invalidateQueries({ queryKey: keys.lists() });
  return conversation;
}

/** The history, newest page first, older pages as the log scrolls up. */
export function useMessages(id: string) {
  return useInfiniteQuery<MessagePage, string | null>({
    queryKey: keys.messages(id),
    initialPageParam: null,
    getNextPageParam: (last) => (last.has_more ? (last.data.at(-1)?.id ?? null) : undefined),
    queryFn: ({ pageParam, signal }) =>
      data(
        api.GET('/v1/conversations/{id}/messages', {
          params: {
            path: { id },
            query: { limit: HISTORY_PAGE, ...(pageParam ? { before: pageParam } : {}) },
          },
          signal,
        }),
      ),
    staleTime: Infinity,
  });
}

/** The notes, newest page first, paged as the history is (before=note_…). */
export function useNotes(id: string) {
  return useInfiniteQuery<NotePage, string | null>({
    queryKey: keys.notes(id),
    initialPageParam: null,
    getNextPageParam: (last) => (last.has_more ? (last.data.at(-1)?.id ?? null) : undefined),
    queryFn: ({ pageParam, signal }) =>
      data(
        api.GET('/v1/conversations/{id}/notes', {
          params: {
            path: { id },
            query: { limit: HISTORY_PAGE, ...(pageParam ? { before: pageParam } : {}) },
          },
          signal,
        }),
      ) as Promise<NotePage>,
    staleTime: Infinity,
  });
}

/** Puts a message the app just sent into the loaded history. */
export function addMessage(message: Message): void {
  queryClient.setQueryData<InfiniteData<MessagePage, string | null>>(
    keys.messages(message.conversation_id),
    (old) => {
      if (!old?.pages[0]) return old;
      if (old.pages.some((p) => p.data.some((m) => m.id === message.id))) return old;
      const [first, ...rest] = old.pages;
      return { ...old, pages: [{ ...first, data: [message, ...first.data] }, ...rest] };
    },
  );
  void queryClient.invalidateQueries({ queryKey: keys.lists() });
}

export type SendInput =
  | { type: 'text'; content: string }
  | { type: 'image' | 'document'; media_id?: string; media_url?: string; content?: string }
  | { type: 'template'; template_name: string; template_params: string[] };

export async function sendMessage(conversation: Conversation, input: SendInput): Promise<Message> {
  const message = await data(
    api.POST('/v1/messages/send', {
      body: { contact_id: conversation.contact_id, channel: conversation.channel, ...input },
    }),
  );
  addMessage(message);
  return message;
}

/** A failed message sent again: a new message with the same content. */
export function retryInput(message: Message): SendInput | null {
  if (message.type === 'text' && message.content) return { type: 'text', content: message.content };
  if ((message.type === 'image' || message.type === 'document') && message.media_url) {
    // An upload is sent again by its id; a link from elsewhere by its link.
    const own = /^(?:https?:\/\/[^/]+)?\/v1\/media\/(med_[A-Za-z0-9]+)/.exec(message.media_url);
    return {
      type: message.type,
      ...(own ? { media_id: own[1] } : { media_url: message.media_url }),
      ...(message.content ? { content: message.content } : {}),
    };
  }
  return null;
}

export async function addNote(conversationId: string, content: string): Promise<void> {
  const note = await data(
    api.POST('/v1/conversations/{id}/notes', {
      params: { path: { id: conversationId } },
      body: { content },
    }),
  );
  upsertNote(note);
}

export async function upload(file: File): Promise<Upload> {
  return data(
    api.POST('/v1/media', {
      // The document types the part as a string (binary); the browser sends the File itself.
      body: { file: file as unknown as string },
      bodySerializer: () => {
        const form = new FormData();
        form.append('file', file, file.name);
        return form;
      },
    }),
  );
}

export async function act(
  id: string,
  action: 'resolve' | 'reopen' | 'unassign' | { user_id: string } | { team_id: string },
): Promise<void> {
  const params = { params: { path: { id } } };
  const conversation =
    action === 'resolve'
      ? await data(api.POST('/v1/conversations/{id}/resolve', params))
      : action === 'reopen'
        ? await data(api.POST('/v1/conversations/{id}/reopen', params))
        : action === 'unassign'
          ? await data(api.POST('/v1/conversations/{id}/unassign', params))
          : await data(api.POST('/v1/conversations/{id}/assign', { ...params, body: action }));
  queryClient.setQueryData<Conversation>(keys.conversation(id), (old) => ({
    ...conversation,
    messages: old?.messages ?? [],
  }));
  void queryClient.invalidateQueries({ queryKey: keys.lists() });
  void queryClient.invalidateQueries({ queryKey: keys.counts() });
}

/** Tells the others this user is on the conversation (DESIGN §5: never stored). */
export function sendPresence(id: string, state: 'viewing' | 'typing'): void {
  api
    .POST('/v1/conversations/{id}/presence', { params: { path: { id } }, body: { state } })
    .catch(() => undefined);
}
