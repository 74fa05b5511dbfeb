import { useEffect, useRef, useState } from 'preact/hooks';
import type { Conversation, Status, View } from '../../api/types.js';
import { ConversationList } from './ConversationList.js';
import { useConversationList, useCounts } from './inbox-data.js';

const VIEWS: { id: View; label: string }[] = [
  { id: 'mine', label: 'Mine' },
  { id: 'unassigned', label: 'Unassigned' },
  { id: 'all', label: 'All' },
];

export interface InboxFilter {
  view: View;
  status: Status;
  q: string;
}

/** The list side of the inbox: views with counts, open/resolved, search, the conversations. */
export function InboxSidebar(props: {
  filter: InboxFilter;
  onFilter: (f: InboxFilter) => void;
  selectedId: string | null;
  onItems: (items: Conversation[]) => void;
}) {
  const { view, status, q } = props.filter;
  const counts = useCounts().data;
  const [search, setSearch] = useState(q);
  const list = useConversationList(view, status, q);
  const items = list.data?.pages.flatMap((p) => p.data) ?? [];
  const total = list.data?.pages[0]?.total ?? 0;

  useEffect(() => props.onItems(items), [list.data]);

  // Search as one types, once the typing pauses.
  const timer = useRef<ReturnType<typeof setTimeout>>(undefined);
  const onSearch = (value: string) => {
    setSearch(value);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => props.onFilter({ ...props.filter, q: value.trim() }), 200);
  };

  return (
    <section class="inbox-list" aria-label="Inbox">
      <div class="list-head">
        <h1 class="visually-hidden">Inbox</h1>
        <div class="views" role="tablist" aria-label="Views">
          {VIEWS.map((v) => {
            const count = counts?.[v.id];
            return (
              <button
                key={v.id}
                role="tab"
                aria-selected={view === v.id}
                class="view"
                onClick={() => props.onFilter({ ...props.filter, view: v.id })}
              >
                {v.label}
                {count !== undefined && count !== null && <span class="count"> {count}</span>}
              </button>
            );
          })}
        </div>
        <div class="list-tools">
          <input
            type="search"
            class="search"
            aria-label="Search conversations"
            placeholder="Search"
            value={search}
            onInput={(e) => onSearch(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Escape') e.currentTarget.blur();
            }}
            data-shortcut-search
          />
          <div class="segmented" role="radiogroup" aria-label="Status">
            {(['open', 'resolved'] as const).map((s) => (
              <button
                key={s}
                role="radio"
                aria-checked={status === s}
                tabIndex={status === s ? 0 : -1}
                onClick={() => props.onFilter({ ...props.filter, status: s })}
                onKeyDown={(e) => {
                  if (['ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown'].includes(e.key)) {
                    e.preventDefault();
                    const next = s === 'open' ? 'resolved' : 'open';
                    props.onFilter({ ...props.filter, status: next });
                    const group = e.currentTarget.parentElement;
                    requestAnimationFrame(() =>
                      group?.querySelector<HTMLElement>('[aria-checked="true"]')?.focus(),
                    );
                  }
                }}
              >
                {s === 'open' ? 'Open' : 'Resolved'}
              </button>
            ))}
          </div>
        </div>
      </div>
      {list.isError ? (
        <p class="list-empty" role="alert">
          The conversations could not be loaded: {list.error.message}
        </p>
      ) : list.isPending ? (
        <p class="list-empty">Loading…</p>
      ) : (
        <ConversationList
          items={items}
          total={total}
          selectedId={props.selectedId}
          hasMore={list.hasNextPage}
          loadMore={() => {
            if (!list.isFetchingNextPage) void list.fetchNextPage();
          }}
          empty={
            q
              ? `Nothing matches “${q}”.`
              : status === 'open'
                ? 'No open conversations here. All caught up.'
                : 'No resolved conversations.'
          }
        />
      )}
    </section>
  );
}
