import { useEffect, useLayoutEffect, useRef } from 'preact/hooks';
import type { Conversation, Message, Note } from '../../api/types.js';
import { fullTime, shortTime } from '../../lib/format.js';
import { retryInput, sendMessage, useMessages, useNotes } from './conversation-data.js';

type Entry = { kind: 'message'; item: Message } | { kind: 'note'; item: Note };

/**
 * The history, oldest at the top. It opens on the newest page; scrolling near the top loads
 * the page before, keeping what was on screen in its place.
 */
export function MessageLog({ conversation }: { conversation: Conversation }) {
  const messages = useMessages(conversation.id);
  const notesQuery = useNotes(conversation.id);
  const notes = notesQuery.data?.pages.flatMap((p) => p.data) ?? [];
  const scrollRef = useRef<HTMLDivElement>(null);
  const before = useRef({ height: 0, top: 0, oldest: '', newest: '' });
  /** Whether the reader is at the newest (then what grows keeps them there). */
  const atBottom = useRef(true);

  const loaded = messages.data?.pages.flatMap((p) => p.data) ?? [];
  const oldestLoaded = loaded.at(-1)?.created_at;
  const entries: Entry[] = [
    ...loaded.map((item) => ({ kind: 'message' as const, item })),
    // A note older than the loaded history shows when its place is loaded.
    ...notes
      .filter((n) => !messages.hasNextPage || !oldestLoaded || n.created_at >= oldestLoaded)
      .map((item) => ({ kind: 'note' as const, item })),
  ].sort((a, b) =>
    a.item.created_at === b.item.created_at
      ? a.item.id.localeCompare(b.item.id)
      : a.item.created_at.localeCompare(b.item.created_at),
  );

  // Notes page beside the history: while the oldest note loaded is newer than the oldest
  // message loaded, the next page of notes is due.
  const oldestNote = notes.at(-1)?.created_at;
  const notesDue =
    notesQuery.hasNextPage &&
    !notesQuery.isFetchingNextPage &&
    (!messages.hasNextPage || (oldestNote && oldestLoaded && oldestNote >= oldestLoaded));
  useEffect(() => {
    if (notesDue) void notesQuery.fetchNextPage();
  }, [notesDue, oldestNote, oldestLoaded]);

  const oldest = entries[0]?.item.id ?? '';
  const newest = entries.at(-1)?.item.id ?? '';
  useLayoutEffect(() => {
    const el = scrollRef.current;
    if (!el) return;
    const was = before.current;
    if (was.oldest && oldest !== was.oldest && newest === was.newest) {
      // Older messages came in above: keep the view where it was.
      el.scrollTop = was.top + (el.scrollHeight - was.height);
    } else if (newest !== was.newest) {
      const nearBottom = was.height - was.top - el.clientHeight < 120;
      if (!was.newest || nearBottom || lastIsOwn(entries)) {
        el.scrollTop = el.scrollHeight;
        atBottom.current = true;
      }
    } else if (atBottom.current) {
      // Something grew in place (notes came in, a status line): a log at its bottom stays there.
      el.scrollTop = el.scrollHeight;
    }
    before.current = { height: el.scrollHeight, top: el.scrollTop, oldest, newest };
  });

  // An image that loads below grows the log: a log that was at its bottom stays there.
  useEffect(() => {
    const el = scrollRef.current;
    if (!el) return;
    const onLoad = (e: Event) => {
      if (!(e.target instanceof HTMLImageElement) || !atBottom.current) return;
      el.scrollTop = el.scrollHeight;
      before.current = { ...before.current, height: el.scrollHeight, top: el.scrollTop };
    };
    el.addEventListener('load', onLoad, true);
    return () => el.removeEventListener('load', onLoad, true);
  }, []);

  const onScroll = () => {
    const el = scrollRef.current!;
    atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 120;
    before.current = { ...before.current, height: el.scrollHeight, top: el.scrollTop };
    if (el.scrollTop < 200 && messages.hasNextPage && !messages.isFetchingNextPage) {
      void messages.fetchNextPage();
    }
  };

  return (
    <div class="log-scroll" ref={scrollRef} onScroll={onScroll}>
      <div role="log" aria-label="Messages" class="log" tabIndex={0}>
        {messages.isFetchingNextPage && <p class="log-note">Loading older messages…</p>}
        {!messages.hasNextPage && messages.isSuccess && (
          <p class="log-note">Start of the conversation</p>
        )}
        {messages.isError && (
          <p class="log-note" role="alert">
            The messages could not be loaded: {messages.error.message}
          </p>
        )}
        {entries.map((e) =>
          e.kind === 'message' ? (
            <MessageBubble key={e.item.id} message={e.item} conversation={conversation} />
          ) : (
            <NoteCard key={e.item.id} note={e.item} />
          ),
        )}
      </div>
    </div>
  );
}

function lastIsOwn(entries: Entry[]): boolean {
  const last = entries.at(-1);
  return last?.kind === 'note' || last?.item.direction === 'outbound';
}

const STATUS: Record<Message['status'], string> = {
  queued: 'Sending',
  sent: 'Sent',
  delivered: 'Delivered',
  read: 'Read',
  failed: 'Failed',
};

/** A media link the app can show: the service's own /v1/media (read with the session). */
function ownMedia(url: string | null): string | null {
  if (!url) return null;
  try {
    const parsed = new URL(url, location.origin);
    return parsed.pathname.startsWith('/v1/media/') ? parsed.pathname : null;
  } catch {
    return null;
  }
}

function MessageBubble({
  message,
  conversation,
}: {
  message: Message;
  conversation: Conversation;
}) {
  const outbound = message.direction === 'outbound';
  const own = ownMedia(message.media_url);
  const retry = message.status === 'failed' ? retryInput(message) : null;
  return (
    <article
      class={`message ${outbound ? 'outbound' : 'inbound'}${message.status === 'failed' ? ' failed' : ''}`}
      aria-label={`${outbound ? 'Sent' : 'Received'} message`}
    >
      <div class="bubble">
        {message.type === 'image' &&
          (own ? (
            <img src={own} alt={message.content ?? 'Image'} class="media" loading="lazy" />
          ) : message.media_url ? (
            <a href={message.media_url} target="_blank" rel="noreferrer noopener">
              Image
            </a>
          ) : null)}
        {message.type === 'document' && message.media_url && (
          <a
            class="document"
            href={own ?? message.media_url}
            target="_blank"
            rel="noreferrer noopener"
          >
            📄 Document
          </a>
        )}
        {message.type === 'template' && <span class="tag-template">Template</span>}
        {message.content && <p class="text">{message.content}</p>}
      </div>
      <p class="meta">
        {message.author && <span>{message.author.name} · </span>}
        <time dateTime={message.created_at} title={fullTime(message.created_at)}>
          {shortTime(message.created_at)}
        </time>
        {outbound && <span class={`status ${message.status}`}> · {STATUS[message.status]}</span>}
      </p>
      {message.status === 'failed' && (
        <p class="failure">
          {message.failure_reason ?? 'The message could not be delivered.'}{' '}
          {retry && (
            <button
              class="link-button"
              onClick={() => void sendMessage(conversation, retry).catch(() => undefined)}
            >
              Retry
            </button>
          )}
        </p>
      )}
    </article>
  );
}

function NoteCard({ note }: { note: Note }) {
  return (
    <article class="note" aria-label="Private note">
      <p class="note-label">
        Private note{note.author ? ` · ${note.author.name}` : ''} ·{' '}
        <time dateTime={note.created_at} title={fullTime(note.created_at)}>
          {shortTime(note.created_at)}
        </time>
      </p>
      <p class="text">{note.content}</p>
    </article>
  );
}
