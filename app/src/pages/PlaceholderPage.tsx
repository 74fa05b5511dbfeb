import { currentSession } from '../modules/session/session.js';

const TEXT = {
  contacts: {
    title: 'Contacts',
    body: 'Searching, tagging, merging, importing and exporting contacts comes with the admin screens. Until then, each conversation shows and edits its contact.',
  },
  broadcasts: {
    title: 'Broadcasts',
    body: 'Building an audience, scheduling and following a broadcast comes with the admin screens. The API has them today: see /docs.',
  },
  settings: {
    title: 'Settings',
    body: 'Channels, webhooks, API keys, people, teams and templates come with the admin screens. The API has them today: see /docs.',
  },
} as const;

/** A screen of the next issue (the admin screens): a real page that says so. */
export function PlaceholderPage({ name }: { name: keyof typeof TEXT }) {
  const text = TEXT[name];
  const session = currentSession();
  if (name === 'settings' && session.user.role !== 'admin') {
    // The server refuses an agent every admin route (403): the app offers none of them.
    return (
      <div class="placeholder">
        <h1 id="page-title">Settings</h1>
        <p>
          Settings are for admins. Ask an admin of {session.account.name} to change channels,
          webhooks, API keys, people, teams or templates.
        </p>
      </div>
    );
  }
  return (
    <div class="placeholder">
      <h1 id="page-title">{text.title}</h1>
      <p>{text.body}</p>
      <p class="muted">
        Coming soon. <a href="/docs">Read the API reference</a>
      </p>
    </div>
  );
}
