import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import {
  AGENT,
  BROADCAST_NAME,
  BROADCAST_TAG,
  BROADCAST_WAIT_MS,
  CANNED,
  CHANNELS,
  CONTACTS,
  DEMO_TAG,
  SCRIPTS,
  TEAM,
  TEMPLATES,
  WEBCHAT_VISITOR,
  type Channel,
  type SampleContact,
  type Step,
} from './demo-data.js';
import { Api, sleep, type Page } from './api-client.js';
import { CliError } from './common.js';

/*
 * `switchboard demo`: fills an account with sample data through the public API, as any client
 * would (no store is opened): contacts, conversations on every channel, templates, a broadcast.
 * Everything it makes is recognisable (contacts by their phones and the tag `demo`, templates,
 * users, teams, canned responses and the broadcast by their names), so a second run adds only
 * what is missing.
 */

interface Contact {
  id: string;
  phone: string | null;
  tags: string[];
}
interface Conversation {
  id: string;
  contact_id: string;
  contact: { identities: { channel: string; id: string }[] } | null;
}
interface Message {
  id: string;
  conversation_id: string;
}
interface Broadcast {
  id: string;
  name: string;
  status: string;
  stats: { sent: number; delivered: number; read: number; replied: number; failed: number };
}
interface ChannelState {
  provider: string | null;
  status: string;
  settings: { widget_key?: string; allowed_origins?: string[]; identity_verification?: string };
}

export interface DemoSummary {
  url: string;
  app_url: string;
  created: number;
  contacts: { total: number; created: number };
  conversations: { total: number; created: number; channels: Channel[]; skipped: string[] };
  templates: { total: number; created: number };
  broadcast: { id: string; status: string; recipients: number; created: boolean };
}

/** Fills the account of `apiKey` on the service at `url`; `say` hears progress lines. */
export async function runDemo(opts: {
  url: string;
  apiKey: string;
  say: (line: string) => void;
  broadcastWaitMs?: number;
}): Promise<DemoSummary> {
  const url = opts.url.replace(/\/+$/, '').replace(/\/v1$/, '');
  const api = new Api(`${url}`, opts.apiKey, opts.say);
  const say = opts.say;
  let created = 0;

  // Contacts: the demo's are those with its phones.
  const existing = new Map(
    (await api.all<Contact>(`/v1/contacts?tag=${DEMO_TAG}`)).map((c) => [c.phone, c]),
  );
  const ids = new Map<string, string>();
  let newContacts = 0;
  for (const c of CONTACTS) {
    const [id, made] = await ensureContact(api, existing, c);
    ids.set(c.key, id);
    if (made) newContacts++;
  }
  created += newContacts;
  say(`contacts: ${CONTACTS.length} (${newContacts} new)`);

  // A teammate and a team to assign to.
  const users = await api.all<{ id: string; email: string }>('/v1/users');
  let agent = users.find((u) => u.email === AGENT.email);
  if (!agent) {
    agent = await api.post<{ id: string; email: string }>('/v1/users', AGENT);
    created++;
  }
  const teams = await api.all<{ id: string; name: string }>('/v1/teams');
  let team = teams.find((t) => t.name === TEAM);
  if (!team) {
    team = await api.post<{ id: string; name: string }>('/v1/teams', {
      name: TEAM,
      user_ids: [agent.id],
    });
    created++;
  }

  // Templates, approved by the sandbox's review.
  const templates = await api.all<{ id: string; name: string; status: string }>('/v1/templates');
  let newTemplates = 0;
  for (const t of TEMPLATES) {
    let template = templates.find((x) => x.name === t.name);
    if (!template) {
      template = await api.post<{ id: string; name: string; status: string }>('/v1/templates', t);
      newTemplates++;
    }
    if (template.status === 'pending')
      await api.post(`/v1/sandbox/templates/${template.id}/review`, { status: 'approved' });
  }
  created += newTemplates;
  say(`templates: ${TEMPLATES.length} (${newTemplates} new)`);

  const canned = await api.all<{ shortcut: string }>('/v1/canned-responses');
  for (const c of CANNED) {
    if (canned.some((x) => x.shortcut === c.shortcut)) continue;
    await api.post('/v1/canned-responses', c);
    created++;
  }

  // Conversations: a contact of the demo with a conversation on the channel has had its script.
  const talked = new Map<Channel, Set<string>>();
  for (const channel of CHANNELS) {
    const list = await api.all<Contact>(`/v1/contacts?tag=${DEMO_TAG}&channel=${channel}`);
    talked.set(channel, new Set(list.map((c) => c.id)));
  }
  let newConversations = 0;
  for (const s of SCRIPTS) {
    const contactId = ids.get(s.contact)!;
    if (talked.get(s.channel)!.has(contactId)) continue;
    const conversationId = await play(api, s.channel, contactId, s.steps);
    if (s.assign)
      await api.post(
        `/v1/conversations/${conversationId}/assign`,
        s.assign === 'agent' ? { user_id: agent.id } : { team_id: team.id },
      );
    if (s.resolve) await api.post(`/v1/conversations/${conversationId}/resolve`);
    newConversations++;
  }

  // The web chat: a visitor through the widget's endpoints.
  const skipped: string[] = [];
  if (talked.get('webchat')!.size === 0) {
    const why = await webchat(api, url);
    if (why === null) newConversations++;
    else {
      skipped.push(`webchat: ${why}`);
      say(`webchat skipped: ${why}`);
    }
  }
  created += newConversations;
  const conversationChannels = CHANNELS.filter(
    (c) => c !== 'webchat' || !skipped.some((s) => s.startsWith('webchat')),
  );
  say(
    `conversations: ${SCRIPTS.length + (conversationChannels.includes('webchat') ? 1 : 0)} on ${conversationChannels.join(', ')} (${newConversations} new)`,
  );

  // The broadcast, waited for until it has finished sending.
  const broadcasts = await api.all<Broadcast>('/v1/broadcasts');
  let broadcast = broadcasts.find((b) => b.name === BROADCAST_NAME);
  const newBroadcast = !broadcast;
  if (!broadcast) {
    broadcast = await api.post<Broadcast>('/v1/broadcasts', {
      name: BROADCAST_NAME,
      channel: 'whatsapp',
      audience: { tags: [BROADCAST_TAG] },
      message: { type: 'template', template_name: 'spring_sale', template_params: ['20%'] },
    });
    created++;
    say(`broadcast "${BROADCAST_NAME}" to the tag "${BROADCAST_TAG}": sending…`);
  }
  const waitUntil = Date.now() + (opts.broadcastWaitMs ?? BROADCAST_WAIT_MS);
  while (broadcast.status === 'sending' || broadcast.status === 'draft') {
    if (Date.now() > waitUntil)
      throw new CliError(
        `the broadcast ${broadcast.id} is still ${broadcast.status}: are the service's workers running?`,
      );
    await sleep(1000);
    broadcast = await api.get<Broadcast>(`/v1/broadcasts/${broadcast.id}`);
  }
  if (newBroadcast && broadcast.status === 'sent') {
    // One recipient answers, so the broadcast shows a reply.
    await api.post('/v1/sandbox/inbound', {
      channel: 'whatsapp',
      contact_id: ids.get('fatima'),
      type: 'text',
      content: 'Is the sale on in the shop too, or only online?',
    });
  }
  const recipients = await api.get<Page<unknown>>(`/v1/broadcasts/${broadcast.id}/recipients`);
  say(`broadcast "${BROADCAST_NAME}": ${broadcast.status}, ${recipients.total} recipients`);

  return {
    url,
    app_url: `${url}/app`,
    created,
    contacts: { total: CONTACTS.length, created: newContacts },
    conversations: {
      total: SCRIPTS.length + (conversationChannels.includes('webchat') ? 1 : 0),
      created: newConversations,
      channels: conversationChannels,
      skipped,
    },
    templates: { total: TEMPLATES.length, created: newTemplates },
    broadcast: {
      id: broadcast.id,
      status: broadcast.status,
      recipients: recipients.total,
      created: newBroadcast,
    },
  };
}

/** The sample contact, found among `existing` (by phone) or made; its id and whether it is new. */
async function ensureContact(
  api: Api,
  existing: Map<string | null, Contact>,
  c: SampleContact,
): Promise<[string, boolean]> {
  const found = existing.get(c.phone);
  if (found) return [found.id, false];
  const made = await api.call<Contact>(
    'POST',
    '/v1/contacts',
    {
      phone: c.phone,
      name: c.name,
      email: c.email,
      tags: [DEMO_TAG, ...c.tags],
      custom_fields: c.fields,
    },
    { allow: [409] },
  );
  if (made.status === 409) {
    // The phone is taken by a contact without the tag: that one is used as it is.
    const list = await api.get<Page<Contact>>(`/v1/contacts?search=${encodeURIComponent(c.phone)}`);
    const contact = list.data.find((x) => x.phone === c.phone);
    if (!contact) throw new CliError(`contact ${c.phone} exists but cannot be found`);
    return [contact.id, false];
  }
  if (c.stage !== null)
    await api.post(`/v1/contacts/${made.body.id}/lifecycle`, { lifecycle_stage: c.stage });
  return [made.body.id, true];
}

/** Plays `steps`: the contact's side through the sandbox, the team's through the send route. */
async function play(api: Api, channel: Channel, contactId: string, steps: Step[]): Promise<string> {
  let conversationId = '';
  for (const step of steps) {
    if ('in' in step) {
      const m = await api.post<Message>('/v1/sandbox/inbound', {
        channel,
        contact_id: contactId,
        type: 'text',
        content: step.in,
      });
      conversationId = m.conversation_id;
    } else if ('out' in step) {
      const m = await api.post<Message>('/v1/messages/send', {
        contact_id: contactId,
        channel,
        type: 'text',
        content: step.out,
      });
      conversationId = m.conversation_id;
    } else {
      await api.post(`/v1/conversations/${conversationId}/notes`, { content: step.note });
    }
  }
  return conversationId;
}

/**
 * A visitor of the web chat writes in through the widget's own endpoints, after connecting the
 * channel (allowed origin: the service's own address) if it is not connected. Returns why it
 * could not, or null.
 */
async function webchat(api: Api, url: string): Promise<string | null> {
  let channel = await api.get<ChannelState>('/v1/channels/webchat');
  if (channel.provider !== 'webchat' || channel.status === 'not_connected') {
    const put = await api.call<ChannelState & { error?: { message: string } }>(
      'PUT',
      '/v1/channels/webchat',
      {
        provider: 'webchat',
        allowed_origins: [new URL(url).origin],
        identity_verification: 'off',
        title: 'Chat with us',
        greeting: 'Hi! Ask us anything, we usually answer within minutes.',
      },
      { allow: [422] },
    );
    if (put.status === 422) return `the web chat cannot be connected (${put.body.error?.message})`;
    channel = put.body;
  }
  const key = channel.settings.widget_key;
  const origin = channel.settings.allowed_origins?.[0];
  if (key === undefined || origin === undefined) return 'the web chat has no allowed origin';
  if (channel.settings.identity_verification === 'required')
    return 'the web chat requires identity verification';
  const visitorPath = `/webchat/v1/${key}`;
  const session = (
    await api.call<{ token: string; visitor: { id: string } }>(
      'POST',
      `${visitorPath}/session`,
      {},
      {
        bearer: null,
        origin,
      },
    )
  ).body;
  const asVisitor = { bearer: session.token, origin };
  let contactId = '';
  for (const step of WEBCHAT_VISITOR.steps) {
    if ('in' in step) {
      await api.call(
        'POST',
        `${visitorPath}/messages`,
        {
          client_id: randomUUID(),
          content: step.in,
        },
        asVisitor,
      );
      if (contactId === '') {
        const list = await api.get<Page<Conversation>>(
          '/v1/conversations?channel=webchat&status=all&limit=100',
        );
        const mine = list.data.find((c) =>
          c.contact?.identities.some((i) => i.channel === 'webchat' && i.id === session.visitor.id),
        );
        if (!mine) return 'the visitor’s conversation did not show up';
        contactId = mine.contact_id;
        await api.call('PUT', `/v1/contacts/${contactId}`, {
          name: WEBCHAT_VISITOR.name,
          email: WEBCHAT_VISITOR.email,
          tags: [DEMO_TAG],
          custom_fields: { source: 'website chat' },
        });
      }
    } else if ('out' in step) {
      const reply = await api.post<Message>('/v1/messages/send', {
        contact_id: contactId,
        channel: 'webchat',
        type: 'text',
        content: step.out,
      });
      // The widget had it open: read.
      await api.call(
        'POST',
        `${visitorPath}/receipts`,
        { status: 'read', message_ids: [reply.id] },
        asVisitor,
      );
    }
  }
  return null;
}

/** The API key: SWITCHBOARD_API_KEY, else the first-start key in the service's saved output. */
export async function demoKey(env: NodeJS.ProcessEnv, logFile: string): Promise<string> {
  const fromEnv = env.SWITCHBOARD_API_KEY?.trim();
  if (fromEnv) return fromEnv;
  let text: string;
  try {
    text = await readFile(logFile, 'utf8');
  } catch {
    throw new CliError(
      `no API key: set SWITCHBOARD_API_KEY to a key of the account to fill, or run this where \`npm start | tee switchboard.log\` saved the first start's output (or give that file with --from-log); ${logFile} cannot be read`,
    );
  }
  const keys = text.match(/sb_live_[A-Za-z0-9_-]+/g);
  if (!keys)
    throw new CliError(
      `no API key in ${logFile}: set SWITCHBOARD_API_KEY to a key of the account to fill`,
    );
  return keys[keys.length - 1]!;
}

function describe(s: DemoSummary): string {
  const lines = [
    s.created === 0
      ? `Nothing new: the sample data was already there, on ${s.url}.`
      : `Sample data on ${s.url}:`,
    `  contacts       ${s.contacts.total}, tagged "${DEMO_TAG}" (${s.contacts.created} new)`,
    `  conversations  ${s.conversations.total} on ${s.conversations.channels.join(', ')} (${s.conversations.created} new)`,
    ...s.conversations.skipped.map((x) => `                 skipped ${x}`),
    `  templates      ${s.templates.total}, approved (${s.templates.created} new)`,
    `  broadcast      "${BROADCAST_NAME}" ${s.broadcast.status}, ${s.broadcast.recipients} recipients (${s.broadcast.id})`,
    `Open the inbox: ${s.app_url}`,
  ];
  return lines.join('\n');
}

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description(
      'fill an account with sample contacts, conversations on every channel, templates and a sent broadcast, through the API on the sandbox (again: adds only what is missing)',
    )
    .option('--url, --api-url <url>', 'the service (default http://127.0.0.1:3000)')
    .option(
      '--from-log <file>',
      'without SWITCHBOARD_API_KEY, the saved output of the first start that holds its key',
      'switchboard.log',
    )
    .option('--json', 'print the summary as JSON')
    .action(async (opts: { apiUrl?: string; fromLog: string; json?: boolean }) => {
      const say = (line: string) => {
        if (!opts.json) process.stdout.write(`${line}\n`);
      };
      try {
        const apiKey = await demoKey(process.env, opts.fromLog);
        const summary = await runDemo({
          url: opts.apiUrl ?? 'http://127.0.0.1:3000',
          apiKey,
          say,
        });
        process.stdout.write(
          opts.json ? `${JSON.stringify(summary, null, 2)}\n` : `\n${describe(summary)}\n`,
        );
      } catch (err) {
        if (!(err instanceof CliError)) throw err;
        process.stderr.write(`switchboard demo: ${err.message}\n`);
        process.exitCode = 1;
      }
    });
}
