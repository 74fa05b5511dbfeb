// A new account's first steps, each computed from what the API already answers (channels,
// users, webhooks, conversations). Dismissal, and the steps once seen done, are kept in this
// browser's localStorage per user and account (docs/app.md): a step stays done once done
// (a first message does not become "not sent" when the contact answers).
import { useEffect, useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Channel } from '../../api/types.js';
import { useQuery } from '../../lib/query.js';
import { currentSession } from '../session/session.js';
import { onSandbox } from './sandbox.js';

export type StepId = 'channel' | 'widget' | 'invite' | 'message' | 'webhook';

export interface Step {
  id: StepId;
  title: string;
  description: string;
  /** The screen where it is done, inside the app. */
  path: string;
  done: boolean;
}

const STEPS: Omit<Step, 'done'>[] = [
  {
    id: 'channel',
    title: 'Connect a channel',
    description:
      'Connect WhatsApp, Messenger or Instagram, or try the sandbox first: it needs no Meta account.',
    path: '/settings/channels',
  },
  {
    id: 'widget',
    title: 'Embed the webchat widget',
    description: 'Turn on webchat and paste its snippet into your website.',
    path: '/settings/channels',
  },
  {
    id: 'invite',
    title: 'Invite a colleague',
    description: 'Agents answer conversations; admins also run the settings.',
    path: '/settings/team',
  },
  {
    id: 'message',
    title: 'Send a first message',
    description: 'Open a conversation in the inbox and reply.',
    path: '/inbox',
  },
  {
    id: 'webhook',
    title: 'Register a webhook',
    description: 'Let your own systems hear of every message and conversation as it happens.',
    path: '/settings/webhooks',
  },
];

interface Saved {
  dismissed: boolean;
  done: StepId[];
}

function storageKey(): string {
  const { user, account } = currentSession();
  return `switchboard.getting-started.${account.id}.${user.id}`;
}

function load(): Saved {
  try {
    const saved = JSON.parse(localStorage.getItem(storageKey()) ?? 'null') as Saved | null;
    if (saved) return { dismissed: saved.dismissed === true, done: saved.done ?? [] };
  } catch {
    // Unreadable: start over.
  }
  return { dismissed: false, done: [] };
}

function save(saved: Saved): void {
  try {
    localStorage.setItem(storageKey(), JSON.stringify(saved));
  } catch {
    // Storage full or refused: the checklist shows again next time, which is harmless.
  }
}

/** The Meta channels, in the order GET /v1/channels lists them (the sandbox tries the first). */
const META_CHANNELS = new Set<Channel>(['whatsapp', 'instagram', 'messenger']);

interface Progress {
  loading: boolean;
  done: Set<StepId>;
  /** A Meta channel the sandbox serves now (the first), where "Try the sandbox" writes in. */
  sandbox: Channel | null;
}

/** What the API says is done now (a read each, refetched whenever the checklist shows). */
function useProgress(enabled: boolean): Progress {
  const fresh = { enabled, staleTime: 0 };
  const channels = useQuery({
    ...fresh,
    queryKey: [...keys.channels(), 'getting-started'],
    queryFn: async ({ signal }) => (await data(api.GET('/v1/channels', { signal }))).data,
  });
  const users = useQuery({
    ...fresh,
    queryKey: [...keys.users(), 'total'],
    queryFn: async ({ signal }) =>
      (await data(api.GET('/v1/users', { params: { query: { limit: 1 } }, signal }))).total,
  });
  const webhooks = useQuery({
    ...fresh,
    queryKey: [...keys.webhooks(), 'total'],
    queryFn: async ({ signal }) => (await data(api.GET('/v1/webhooks', { signal }))).total,
  });
  const conversations = useQuery({
    ...fresh,
    queryKey: [...keys.lists(), 'getting-started'],
    queryFn: async ({ signal }) =>
      (
        await data(
          api.GET('/v1/conversations', {
            params: { query: { status: 'all', sort: 'last_activity', limit: 100 } },
            signal,
          }),
        )
      ).data,
  });
  const done = new Set<StepId>();
  const connected = (channels.data ?? []).filter((c) => c.id !== null && c.status === 'active');
  const sandboxed = (channels.data ?? []).filter(
    (c) => META_CHANNELS.has(c.channel) && onSandbox(c),
  );
  const onSandboxNow = new Set(sandboxed.map((c) => c.channel));
  // Connected for real, or tried: a conversation on a channel the sandbox serves (one the
  // sandbox's sample customer, or a script through POST /v1/sandbox/inbound, started).
  if (
    connected.some((c) => c.channel !== 'webchat') ||
    (conversations.data ?? []).some((c) => onSandboxNow.has(c.channel))
  )
    done.add('channel');
  if (connected.some((c) => c.channel === 'webchat')) done.add('widget');
  if ((users.data ?? 0) > 1) done.add('invite');
  if ((conversations.data ?? []).some((c) => c.last_message?.direction === 'outbound'))
    done.add('message');
  if ((webhooks.data ?? 0) > 0) done.add('webhook');
  const loading = [channels, users, webhooks, conversations].some((q) => q.isPending);
  return { loading, done, sandbox: sandboxed[0]?.channel ?? null };
}

export interface Checklist {
  /** Admins only: agents never see it. */
  forMe: boolean;
  loading: boolean;
  steps: Step[];
  doneCount: number;
  allDone: boolean;
  dismissed: boolean;
  /** Where "Try the sandbox" writes in; null when no Meta channel is on the sandbox. */
  sandbox: Channel | null;
  dismiss: () => void;
  restore: () => void;
}

/**
 * The checklist; `where: 'inbox'` reads nothing once it is dismissed (the inbox shows no panel
 * then), the page always reads.
 */
export function useChecklist(where: 'inbox' | 'page'): Checklist {
  const forMe = currentSession().user.role === 'admin';
  const [saved, setSaved] = useState(load);
  const progress = useProgress(forMe && (where === 'page' || !saved.dismissed));
  const seen = new Set<StepId>([...saved.done, ...progress.done]);
  const newlyDone = [...progress.done].filter((id) => !saved.done.includes(id)).join(',');
  useEffect(() => {
    if (!newlyDone) return;
    const next = { ...saved, done: [...seen] };
    save(next);
    setSaved(next);
  }, [newlyDone]);
  const steps = STEPS.map((s) => ({ ...s, done: seen.has(s.id) }));
  const doneCount = steps.filter((s) => s.done).length;
  const update = (dismissed: boolean) => {
    const next = { ...saved, dismissed };
    save(next);
    setSaved(next);
  };
  return {
    forMe,
    loading: progress.loading,
    steps,
    doneCount,
    allDone: doneCount === steps.length,
    dismissed: saved.dismissed,
    sandbox: progress.sandbox,
    dismiss: () => update(true),
    restore: () => update(false),
  };
}
