import './settings.css';
import type { ComponentType } from 'preact';
import { onLinkClick } from '../lib/router.js';
import { currentSession } from '../modules/session/session.js';
import { AccountSettings } from '../modules/settings/AccountSettings.js';
import { ApiKeysSettings } from '../modules/settings/ApiKeysSettings.js';
import { ChannelsSettings } from '../modules/settings/ChannelsSettings.js';
import { TeamSettings } from '../modules/settings/TeamSettings.js';
import { TemplatesSettings } from '../modules/settings/TemplatesSettings.js';
import { WebhooksSettings } from '../modules/settings/WebhooksSettings.js';

interface Section {
  path: string;
  label: string;
  /** Only admins see it (the server refuses an agent its writes with 403 all the same). */
  admin: boolean;
  /** The section, given the rest of its path (`/settings/webhooks/wh_…` → `['wh_…']`). */
  component: ComponentType<{ rest: string[] }>;
}

const SECTIONS: Section[] = [
  { path: 'channels', label: 'Channels', admin: true, component: ChannelsSettings },
  { path: 'webhooks', label: 'Webhooks', admin: true, component: WebhooksSettings },
  { path: 'team', label: 'Team', admin: true, component: TeamSettings },
  { path: 'api-keys', label: 'API keys', admin: true, component: ApiKeysSettings },
  { path: 'templates', label: 'Templates', admin: true, component: TemplatesSettings },
  { path: 'account', label: 'Your account', admin: false, component: AccountSettings },
];

/** Settings: a list of sections beside the one open (`/settings/{section}/…`). */
export function SettingsPage({ rest }: { rest: string[] }) {
  const session = currentSession();
  const isAdmin = session.user.role === 'admin';
  const sections = SECTIONS.filter((s) => isAdmin || !s.admin);
  const asked = SECTIONS.find((s) => s.path === rest[0]);
  const forAdmins = (
    <p class="muted">
      Settings are for admins. Ask an admin of {session.account.name} to change channels, webhooks,
      API keys, people, teams or templates.
    </p>
  );
  if (asked && asked.admin && !isAdmin) {
    return (
      <div class="placeholder">
        <h1 id="page-title">Settings</h1>
        {forAdmins}
      </div>
    );
  }
  const open = asked ?? sections[0]!;
  const Component = open.component;
  return (
    <div class="settings">
      <nav class="settings-nav" aria-label="Settings">
        <ul>
          {sections.map((s) => (
            <li key={s.path}>
              <a
                href={`/app/settings/${s.path}`}
                onClick={onLinkClick(`/settings/${s.path}`)}
                aria-current={s === open ? 'page' : undefined}
              >
                {s.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <div class="settings-section">
        {!isAdmin && forAdmins}
        <Component rest={asked ? rest.slice(1) : []} />
      </div>
    </div>
  );
}
