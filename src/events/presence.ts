import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Notifications } from '../realtime/notifications.js';

/** The channel presence crosses processes on: `<account id> <JSON of the data>`. */
const PRESENCE_CHANNEL = 'switchboard_presence';

/** How long one report of presence holds, unless repeated. */
export const PRESENCE_TTL_MS = 30_000;

/** `presence.updated`: who is viewing or typing in a conversation, until `expires_at`. */
export interface PresenceUpdate {
  conversation_id: string;
  user: { id: string; name: string };
  state: 'viewing' | 'typing';
  expires_at: string;
}

/**
 * Presence for the live event streams only: never stored, never sent to webhooks, never
 * replayed. Published through NOTIFY so that every API process's streams hear it; while this
 * process is not listening (no LISTEN connection, or a pooler that swallows notifications) only
 * its own streams hear it.
 */
export class Presence {
  private readonly listeners = new Map<string, Set<(update: PresenceUpdate) => void>>();
  private readonly unlisten: () => void;

  constructor(private readonly deps: { db: Db; notifications: Notifications }) {
    this.unlisten = deps.notifications.subscribe(
      { channel: PRESENCE_CHANNEL },
      {
        notify: (payload) => {
          if (payload === null) return;
          const space = payload.indexOf(' ');
          if (space < 0) return;
          let update: PresenceUpdate;
          try {
            update = JSON.parse(payload.slice(space + 1)) as PresenceUpdate;
          } catch {
            return; // not ours
          }
          this.deliver(payload.slice(0, space), update);
        },
      },
    );
  }

  async publish(accountId: string, update: PresenceUpdate): Promise<void> {
    if (!this.deps.notifications.live) {
      this.deliver(accountId, update);
      return;
    }
    const payload = `${accountId} ${JSON.stringify(update)}`;
    await sql`SELECT pg_notify(${PRESENCE_CHANNEL}, ${payload})`.execute(this.deps.db);
  }

  /** Calls `listener` with the account's presence updates; returns the unsubscribe function. */
  subscribe(accountId: string, listener: (update: PresenceUpdate) => void): () => void {
    let set = this.listeners.get(accountId);
    if (!set) {
      set = new Set();
      this.listeners.set(accountId, set);
    }
    const own = (update: PresenceUpdate) => listener(update);
    set.add(own);
    void this.deps.notifications.start();
    return () => {
      set.delete(own);
      if (set.size === 0 && this.listeners.get(accountId) === set) this.listeners.delete(accountId);
    };
  }

  stop(): void {
    this.unlisten();
    this.listeners.clear();
  }

  private deliver(accountId: string, update: PresenceUpdate): void {
    const set = this.listeners.get(accountId);
    if (set) for (const listener of [...set]) listener(update);
  }
}
