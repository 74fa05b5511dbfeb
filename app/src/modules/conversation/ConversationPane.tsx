import { useEffect, useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Team, User } from '../../api/types.js';
import { channelName, displayName } from '../../lib/format.js';
import { useQuery } from '../../lib/query.js';
import { onLinkClick } from '../../lib/router.js';
import { MenuButton, type MenuItem } from '../../ui/MenuButton.js';
import { ContactPanel } from '../contacts/ContactPanel.js';
import { setOpenConversation } from '../live/live.js';
import { usePresence, whenSomeoneArrives } from '../live/presence.js';
import { currentSession } from '../session/session.js';
import { Composer, type ComposerMode } from './Composer.js';
import { act, markRead, sendPresence, useConversation } from './conversation-data.js';
import { MessageLog } from './MessageLog.js';

/** Presence is said again this often while the conversation is open (it lasts 30 s). */
const VIEWING_EVERY_MS = 15_000;

export interface PaneCommands {
  mode: ComposerMode;
  focusKey: number;
}

export function ConversationPane(props: {
  id: string;
  commands: PaneCommands;
  onMode: (mode: ComposerMode) => void;
}) {
  const { id } = props;
  const conversation = useConversation(id);
  const [showContact, setShowContact] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const presence = usePresence(id);

  useEffect(() => {
    setOpenConversation({ id, markRead: () => void markRead(id).catch(() => undefined) });
    return () => setOpenConversation(null);
  }, [id]);
  useEffect(() => {
    sendPresence(id, 'viewing');
    const timer = setInterval(() => sendPresence(id, 'viewing'), VIEWING_EVERY_MS);
    whenSomeoneArrives((where) => {
      if (where === id) sendPresence(id, 'viewing');
    });
    return () => {
      clearInterval(timer);
      whenSomeoneArrives(null);
    };
  }, [id]);

  const c = conversation.data;
  if (!c) {
    return (
      <section class="pane" aria-label="Conversation">
        {conversation.isError ? (
          <p class="pane-empty" role="alert">
            This conversation could not be opened: {conversation.error.message}
          </p>
        ) : (
          <p class="pane-empty">Loading…</p>
        )}
      </section>
    );
  }

  const name = displayName(c.contact);
  const run = (action: Parameters<typeof act>[1]) => {
    setError(null);
    act(id, action).catch((err: Error) => setError(err.message));
  };

  return (
    <div class={`conversation${showContact ? ' with-contact' : ''}`}>
      <section class="pane" aria-label={`Conversation with ${name}`}>
        <header class="pane-head">
          <a class="back" href="/app/inbox" onClick={onLinkClick('/inbox')}>
            ← Inbox
          </a>
          <div class="pane-title">
            <h2>{name}</h2>
            <p class="muted small">
              {channelName(c.channel)} · {c.status === 'open' ? 'Open' : 'Resolved'} ·{' '}
              {c.assigned_to ? `Assigned to ${c.assigned_to.name}` : 'Unassigned'}
            </p>
          </div>
          <div class="pane-actions">
            <AssignMenu id={id} assigned={c.assigned_to !== null} run={run} />
            {c.status === 'open' ? (
              <button
                type="button"
                class="button"
                onClick={() => run('resolve')}
                data-shortcut-resolve
              >
                Resolve
              </button>
            ) : (
              <button type="button" class="button" onClick={() => run('reopen')}>
                Reopen
              </button>
            )}
            <button
              type="button"
              class="button ghost details-toggle"
              aria-expanded={showContact}
              onClick={() => setShowContact(!showContact)}
            >
              Details
            </button>
          </div>
        </header>
        <p class="presence" aria-live="polite">
          {presence.map((p) => `${p.user.name} is ${p.state}`).join(' · ')}
        </p>
        {error && (
          <p class="composer-error" role="alert">
            {error}
          </p>
        )}
        <MessageLog conversation={c} />
        <Composer
          conversation={c}
          mode={props.commands.mode}
          onMode={props.onMode}
          focusKey={props.commands.focusKey}
        />
      </section>
      {c.contact && <ContactPanel contactId={c.contact.id} conversationId={c.id} />}
    </div>
  );
}

function AssignMenu(props: {
  id: string;
  assigned: boolean;
  run: (action: Parameters<typeof act>[1]) => void;
}) {
  const me = currentSession().user;
  const users = useQuery<User[]>({
    queryKey: keys.users(),
    queryFn: async ({ signal }) =>
      (await data(api.GET('/v1/users', { params: { query: { limit: 100 } }, signal }))).data,
    staleTime: 300_000,
  });
  const teams = useQuery<Team[]>({
    queryKey: keys.teams(),
    queryFn: async ({ signal }) =>
      (await data(api.GET('/v1/teams', { params: { query: { limit: 100 } }, signal }))).data,
    staleTime: 300_000,
  });
  const items: MenuItem[] = [
    { label: 'Assign to me', onSelect: () => props.run({ user_id: me.id }) },
    ...(users.data ?? [])
      .filter((u) => u.id !== me.id)
      .map((u) => ({
        label: u.name,
        group: 'People',
        onSelect: () => props.run({ user_id: u.id }),
      })),
    ...(teams.data ?? []).map((t) => ({
      label: t.name,
      group: 'Teams',
      onSelect: () => props.run({ team_id: t.id }),
    })),
    ...(props.assigned
      ? [{ label: 'Unassign', group: ' ', onSelect: () => props.run('unassign') }]
      : []),
  ];
  return <MenuButton label="Assign" items={items} />;
}
