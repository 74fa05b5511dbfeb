import type { InfiniteData } from '@tanstack/query-core';
import { api, data, request } from '../../api/client.js';
import { keys, type MessagePage } from '../../api/keys.js';
import type { Conversation, Message, Note, Upload } from '../../api/types.js';
import { queryClient, useInfiniteQuery, useQuery } from '../../lib/query.js';

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

export function useNotes(id: string) {
  return useQuery<Note[]>({
    queryKey: keys.notes(id),
    queryFn: async ({ signal }) =>
      (
        await data(
          api.GET('/v1/conversations/{id}/notes', {
            params: { path: { id }, query: { limit: 100 } },
            signal,
          }),
        )
      ).data,
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
  // `media_id` is DESIGN §5's upload (POST /v1/media); the document does not carry it yet.
  const message = await request<Message>('/v1/messages/send', {
    method: 'POST',
    json: { contact_id: conversation.contact_id, channel: conversation.channel, ...input },
  });
  addMessage(message);
  return message;
}

/** A failed message sent again: a new message with the same content. */
export function retryInput(message: Message): SendInput | null {
  if (message.type === 'text' && message.content) return { type: 'text', content: message.content };
  if ((message.type === 'image' || message.type === 'document') && message.media_url) {
    return {
      type: message.type,
      media_url: message.media_url,
      ...(message.content ? { content: message.content } : {}),
    };
  }
  return null;
}

export async function addNote(conversationId: string, content: string): Promise<void> {
  await data(
    api.POST('/v1/conversations/{id}/notes', {
      params: { path: { id: conversationId } },
      body: { content },
    }),
  );
  await queryClient.invalidateQueries({ queryKey: keys.notes(conversationId) });
}

export async function upload(file: File): Promise<Upload> {
  const form = new FormData();
  form.append('file', file, file.name);
  return request<Upload>('/v1/media', { method: 'POST', body: form });
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
  request(`/v1/conversations/${encodeURIComponent(id)}/presence`, {
    method: 'POST',
    json: { state },
  }).catch(() => undefined);
}
