import {
  elementScroll,
  observeElementOffset,
  observeElementRect,
  Virtualizer,
} from '@tanstack/virtual-core';
import { useEffect, useLayoutEffect, useReducer, useRef, useState } from 'preact/hooks';
import type { Conversation } from '../../api/types.js';
import { displayName, shortTime } from '../../lib/format.js';
import { onLinkClick } from '../../lib/router.js';
import { Avatar } from '../../ui/Avatar.js';

const ROW_HEIGHT = 76;

/**
 * The conversations, virtual: only the rows on screen are in the DOM, each with its position
 * in the whole list (aria-posinset of aria-setsize), so a million conversations scroll as ten.
 */
export function ConversationList(props: {
  items: Conversation[];
  total: number;
  selectedId: string | null;
  hasMore: boolean;
  loadMore: () => void;
  empty: string;
}) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const [virtualizer] = useState(
    () =>
      new Virtualizer<HTMLDivElement, HTMLElement>({
        count: 0,
        getScrollElement: () => scrollRef.current,
        estimateSize: () => ROW_HEIGHT,
        overscan: 8,
        scrollToFn: elementScroll,
        observeElementRect,
        observeElementOffset,
        onChange: () => rerender(0),
      }),
  );
  virtualizer.setOptions({ ...virtualizer.options, count: props.items.length });
  useLayoutEffect(() => virtualizer._didMount(), [virtualizer]);
  useLayoutEffect(() => virtualizer._willUpdate());

  const rows = virtualizer.getVirtualItems();
  const last = rows[rows.length - 1];
  useEffect(() => {
    if (last && last.index >= props.items.length - 10 && props.hasMore) props.loadMore();
  }, [last?.index, props.items.length, props.hasMore]);

  // j/k move the selection: keep it in sight.
  const selectedIndex = props.items.findIndex((c) => c.id === props.selectedId);
  useEffect(() => {
    if (selectedIndex >= 0) virtualizer.scrollToIndex(selectedIndex, { align: 'auto' });
  }, [selectedIndex]);

  if (props.items.length === 0) {
    return (
      <div class="list-empty" role="list" aria-label="Conversations">
        {/* A list holds list items only (axe): the empty state is its one item. */}
        <p role="listitem">{props.empty}</p>
      </div>
    );
  }

  return (
    <div class="list-scroll" ref={scrollRef}>
      <div
        role="list"
        aria-label="Conversations"
        class="list"
        style={{ height: `${virtualizer.getTotalSize()}px` }}
      >
        {rows.map((row) => {
          const conversation = props.items[row.index]!;
          return (
            <ConversationRow
              key={conversation.id}
              conversation={conversation}
              selected={conversation.id === props.selectedId}
              posinset={row.index + 1}
              setsize={props.total}
              top={row.start}
            />
          );
        })}
      </div>
    </div>
  );
}

function ConversationRow(props: {
  conversation: Conversation;
  selected: boolean;
  posinset: number;
  setsize: number;
  top: number;
}) {
  const c = props.conversation;
  const name = displayName(c.contact);
  const preview = c.last_message
    ? `${c.last_message.direction === 'outbound' ? 'You: ' : ''}${c.last_message.preview}`
    : 'No messages yet';
  const unread = c.unread_count > 0;
  const href = `/app/conversations/${c.id}`;
  return (
    <div
      role="listitem"
      aria-label={`${name}, ${unread ? `${c.unread_count} unread, ` : ''}${preview}`}
      aria-posinset={props.posinset}
      aria-setsize={props.setsize}
      class={`row${props.selected ? ' selected' : ''}${unread ? ' unread' : ''}`}
      style={{ transform: `translateY(${props.top}px)` }}
    >
      <a
        href={href}
        onClick={onLinkClick(`/conversations/${c.id}`)}
        aria-current={props.selected ? 'page' : undefined}
        data-conversation-id={c.id}
      >
        <Avatar name={name} />
        <span class="row-main">
          <span class="row-top">
            <span class="row-name">{name}</span>
            <span class="row-time">
              {c.last_message ? shortTime(c.last_message.created_at) : ''}
            </span>
          </span>
          <span class="row-bottom">
            <span class="row-preview">{preview}</span>
            {unread && (
              <span class="badge" aria-label={`${c.unread_count} unread`}>
                {c.unread_count}
              </span>
            )}
          </span>
        </span>
      </a>
    </div>
  );
}
