import type { Contact, Conversation } from '../api/types.js';

type Named = Pick<Contact, 'name' | 'phone' | 'identities'> | null;

/** A contact's display name: its name, else its phone, else its first identity. */
export function displayName(contact: Named): string {
  if (!contact) return 'Deleted contact';
  return contact.name || contact.phone || contact.identities[0]?.id || 'Unknown contact';
}

const CHANNELS: Record<Conversation['channel'], string> = {
  whatsapp: 'WhatsApp',
  messenger: 'Messenger',
  instagram: 'Instagram',
  webchat: 'Webchat',
};
export function channelName(channel: Conversation['channel']): string {
  return CHANNELS[channel];
}

const time = new Intl.DateTimeFormat(undefined, { hour: 'numeric', minute: '2-digit' });
const day = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short' });
const full = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** Today's times as 14:05, older ones as 3 Mar. */
export function shortTime(iso: string): string {
  const date = new Date(iso);
  return date.toDateString() === new Date().toDateString() ? time.format(date) : day.format(date);
}
export function fullTime(iso: string): string {
  return full.format(new Date(iso));
}

/** Whether the 24-hour window is open now (webchat has none: always open). */
export function windowOpen(conversation: Conversation): boolean {
  if (conversation.channel === 'webchat') return true;
  const expires = conversation.window_expires_at;
  return expires !== null && new Date(expires).getTime() > Date.now();
}

export function initials(name: string): string {
  const letters = name
    .split(/\s+/)
    .filter((w) => /^\p{L}/u.test(w))
    .slice(0, 2)
    .map((w) => w[0]!.toUpperCase());
  return letters.join('') || '#';
}
