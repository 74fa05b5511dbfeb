import type { GraphClient } from '../meta/graph-client.js';
import type { PageChannel } from './requests.js';

/** The profile fields each channel lets a page token read (DESIGN §4). */
const FIELDS: Record<PageChannel, string> = {
  messenger: 'first_name,last_name',
  instagram: 'name,username',
};

/**
 * The name a person shows on Messenger (`first_name last_name`) or Instagram (`name`, else
 * `username`), read with the page token; null when the profile has none. Throws Graph's
 * refusal (a GraphError) for the caller to judge.
 */
export async function lookUpSenderName(
  graph: GraphClient,
  opts: { channel: PageChannel; token: string; senderId: string; signal?: AbortSignal },
): Promise<string | null> {
  const profile = await graph.call<Record<string, unknown>>(
    'GET',
    encodeURIComponent(opts.senderId),
    { token: opts.token, query: { fields: FIELDS[opts.channel] }, signal: opts.signal },
  );
  const text = (v: unknown) => (typeof v === 'string' ? v.replaceAll('\u0000', '').trim() : '');
  const name =
    opts.channel === 'messenger'
      ? [text(profile.first_name), text(profile.last_name)].filter(Boolean).join(' ')
      : text(profile.name) || text(profile.username);
  return name === '' ? null : name.slice(0, 200);
}
