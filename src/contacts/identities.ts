import { CHANNELS } from '../channels/channel.js';
import type { Channel, IdentityChannel } from '../db/schema.js';

/** The channels whose ids are stored as identities; WhatsApp's identity is the phone. */
export const IDENTITY_CHANNELS = [
  'instagram',
  'messenger',
  'webchat',
] as const satisfies readonly IdentityChannel[];

export function isIdentityChannel(channel: Channel): channel is IdentityChannel {
  return (IDENTITY_CHANNELS as readonly Channel[]).includes(channel);
}

/** One of a contact's ids, as the API shows it: for whatsapp, the phone (E.164). */
export interface Identity {
  channel: Channel;
  id: string;
}

/** A contact's identities as the API shows them: the phone as WhatsApp's, then the stored ones, in channel order. */
export function presentIdentities(
  phone: string | null,
  stored: readonly { channel: IdentityChannel; id: string }[],
): Identity[] {
  const all: Identity[] = phone === null ? [] : [{ channel: 'whatsapp', id: phone }];
  for (const s of stored) all.push({ channel: s.channel, id: s.id });
  return all.sort((a, b) => CHANNELS.indexOf(a.channel) - CHANNELS.indexOf(b.channel));
}

/**
 * How a provider addresses the contact on `channel`: the id stored for it, or on WhatsApp the
 * phone's digits (E.164 without its `+`, as the Cloud API takes them); null when it has none.
 */
export function addressOn(
  channel: Channel,
  phone: string | null,
  identity: string | null,
): string | null {
  if (addressedByPhone(channel)) return phone === null ? null : phone.replace(/^\+/, '');
  return identity;
}

/** Whether a provider reaches a contact on `channel` by its phone (WhatsApp), not a stored id. */
export function addressedByPhone(channel: Channel): boolean {
  return channel === 'whatsapp';
}
