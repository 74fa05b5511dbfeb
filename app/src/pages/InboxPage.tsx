import { useEffect, useRef, useState } from 'preact/hooks';
import type { Conversation } from '../api/types.js';
import { navigate } from '../lib/router.js';
import { ConversationPane } from '../modules/conversation/ConversationPane.js';
import type { ComposerMode } from '../modules/conversation/Composer.js';
import { act } from '../modules/conversation/conversation-data.js';
import { GettingStartedPanel } from '../modules/getting-started/Checklist.js';
import { useChecklist } from '../modules/getting-started/checklist.js';
import { InboxSidebar, type InboxFilter } from '../modules/inbox/InboxSidebar.js';
import { useShortcuts } from '../modules/shortcuts/shortcuts.js';

const FILTER_KEY = 'switchboard.inbox.filter';

function savedFilter(): InboxFilter {
  try {
    const saved = JSON.parse(sessionStorage.getItem(FILTER_KEY) ?? 'null') as InboxFilter | null;
    if (saved) return { ...saved, q: '' };
  } catch {
    // A damaged saved filter is not worth an error.
  }
  return { view: 'all', status: 'open', q: '' };
}

/** The inbox: the list of a view beside the open conversation (one pane at a time on a phone). */
export function InboxPage({ conversationId }: { conversationId: string | null }) {
  const [filter, setFilter] = useState(savedFilter);
  const [items, setItems] = useState<Conversation[]>([]);
  const [mode, setMode] = useState<ComposerMode>('reply');
  const [focusKey, setFocusKey] = useState(0);
  const checklist = useChecklist('inbox');
  const itemsRef = useRef(items);
  itemsRef.current = items;

  useEffect(() => sessionStorage.setItem(FILTER_KEY, JSON.stringify(filter)), [filter]);
  useEffect(() => setMode('reply'), [conversationId]);

  // The tab's title counts the unread conversations of the list on screen.
  const unread = items.filter((c) => c.unread_count > 0).length;
  useEffect(() => {
    document.title = `${unread > 0 ? `(${unread}) ` : ''}Inbox · Switchboard`;
  }, [unread]);

  const step = (by: number) => {
    const list = itemsRef.current;
    if (list.length === 0) return;
    const at = list.findIndex((c) => c.id === conversationId);
    const next = list[Math.min(Math.max(at === -1 ? 0 : at + by, 0), list.length - 1)]!;
    navigate(`/conversations/${next.id}`);
    requestAnimationFrame(() =>
      document.querySelector<HTMLElement>(`[data-conversation-id="${next.id}"]`)?.focus(),
    );
  };
  const compose = (m: ComposerMode) => {
    if (!conversationId) return;
    setMode(m);
    setFocusKey((k) => k + 1);
  };

  useShortcuts({
    j: () => step(1),
    k: () => step(-1),
    r: () => compose('reply'),
    n: () => compose('note'),
    e: () => {
      if (conversationId) void act(conversationId, 'resolve').catch(() => undefined);
    },
    '/': () => document.querySelector<HTMLInputElement>('[data-shortcut-search]')?.focus(),
  });

  return (
    <div class={`inbox${conversationId ? ' has-conversation' : ''}`}>
      <InboxSidebar
        filter={filter}
        onFilter={setFilter}
        selectedId={conversationId}
        onItems={setItems}
      />
      {conversationId ? (
        <ConversationPane
          key={conversationId}
          id={conversationId}
          commands={{ mode, focusKey }}
          onMode={(m) => {
            setMode(m);
            setFocusKey((k) => k + 1);
          }}
        />
      ) : (
        <section class="pane pane-empty" aria-label="Conversation">
          <GettingStartedPanel checklist={checklist} />
          <p>
            Choose a conversation. <kbd>j</kbd> and <kbd>k</kbd> move through the list; <kbd>?</kbd>{' '}
            lists every shortcut.
          </p>
        </section>
      )}
    </div>
  );
}
