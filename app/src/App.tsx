import { useEffect, useState } from 'preact/hooks';
import { navigate, onLinkClick, useRoute, type Route } from './lib/router.js';
import { startLive, stopLive } from './modules/live/live.js';
import { setPresenceSelf } from './modules/live/presence.js';
import { loadSession, signOut, useSession } from './modules/session/session.js';
import { ShortcutsDialog } from './modules/shortcuts/ShortcutsDialog.js';
import { useShortcuts } from './modules/shortcuts/shortcuts.js';
import { AcceptInvitePage } from './pages/AcceptInvitePage.js';
import { InboxPage } from './pages/InboxPage.js';
import { BroadcastsPage } from './pages/BroadcastsPage.js';
import { ContactsPage } from './pages/ContactsPage.js';
import { GettingStartedPage } from './pages/GettingStartedPage.js';
import { SettingsPage } from './pages/SettingsPage.js';
import { SignInPage } from './pages/SignInPage.js';
import type { Session } from './api/types.js';

export function App() {
  const session = useSession();
  const route = useRoute();
  useEffect(() => void loadSession(), []);
  useEffect(() => {
    const recheck = () => void loadSession();
    document.addEventListener('switchboard:stream-ended', recheck);
    return () => document.removeEventListener('switchboard:stream-ended', recheck);
  }, []);

  if (route.name === 'setup' || route.name === 'invite') {
    if (session.status !== 'signed-in') return <AcceptInvitePage setup={route.name === 'setup'} />;
  }
  if (session.status === 'loading') return <p class="boot">Loading…</p>;
  if (session.status === 'signed-out') return <SignInPage />;
  return <Shell session={session.session} route={route} />;
}

const NAV = [
  { path: '/inbox', label: 'Inbox', match: 'inbox' },
  { path: '/contacts', label: 'Contacts', match: 'contacts' },
  { path: '/broadcasts', label: 'Broadcasts', match: 'broadcasts' },
  { path: '/settings', label: 'Settings', match: 'settings' },
] as const;

function Shell({ session, route }: { session: Session; route: Route }) {
  const [help, setHelp] = useState(false);
  useEffect(() => {
    setPresenceSelf(session.user.id);
    startLive();
    return stopLive;
  }, [session.user.id]);
  // Signed in from a sign-in, setup or invite address, or the app's bare address: on to the inbox.
  useEffect(() => {
    const bare = location.pathname === '/app' || location.pathname === '/app/';
    if (bare || route.name === 'sign-in' || route.name === 'setup' || route.name === 'invite') {
      navigate('/inbox', { replace: true });
    }
  }, [route.name]);
  useShortcuts({ '?': () => setHelp(true) });

  const name = session.user.name ?? session.user.email;
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <span class="brand">
          <span class="brand-mark" aria-hidden="true" />
          <span class="brand-name">Switchboard</span>
        </span>
        <nav aria-label="Main">
          <ul>
            {NAV.map((item) => (
              <li key={item.path}>
                <a
                  href={`/app${item.path}`}
                  onClick={onLinkClick(item.path)}
                  aria-current={route.name === item.match ? 'page' : undefined}
                >
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="spacer" />
        <button
          type="button"
          class="icon-button help"
          aria-label="Keyboard shortcuts"
          onClick={() => setHelp(true)}
        >
          ?
        </button>
        <span class="who" title={`${session.account.name} · ${session.user.email}`}>
          {name}
        </span>
        <button type="button" class="button ghost small" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main id="main" class="main">
        <Page route={route} />
      </main>
      {help && <ShortcutsDialog onClose={() => setHelp(false)} />}
    </div>
  );
}

/** The screen of the route; each area reads the rest of its path itself. */
function Page({ route }: { route: Route }) {
  switch (route.name) {
    case 'contacts':
      return <ContactsPage rest={route.rest} />;
    case 'broadcasts':
      return <BroadcastsPage rest={route.rest} />;
    case 'settings':
      return <SettingsPage rest={route.rest} />;
    case 'getting-started':
      return <GettingStartedPage />;
    case 'inbox':
      return <InboxPage conversationId={route.conversationId} />;
    case 'sign-in':
    case 'setup':
    case 'invite':
      // Signed in already: the Shell moves on to the inbox.
      return <InboxPage conversationId={null} />;
  }
}
