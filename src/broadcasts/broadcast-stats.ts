import type { Tx } from '../db/database.js';
import type { MessageStatus } from '../db/schema.js';
import type { MessageObserver } from '../messages/message-observer.js';
import type { MessageRow } from '../messages/messages.repository.js';
import type { Clock } from '../clock.js';
import type { BroadcastsRepository } from './broadcasts.repository.js';
import type { ProgressAnnouncer } from './broadcast-progress.js';

const LEVEL: Record<MessageStatus, number> = {
  queued: 0,
  sent: 1,
  delivered: 2,
  read: 3,
  failed: -1,
};

/**
 * The broadcast funnel, kept from what messages report: each message counted once per level.
 * `sent` = accepted by the provider (a report that skips ahead implies it), `delivered` =
 * reached delivered or read, `read` = reached read, `failed` = failed before or after
 * acceptance; `replied` = the contact wrote on the conversation afterwards, once per broadcast.
 */
export class BroadcastStats implements MessageObserver {
  constructor(
    private readonly deps: {
      broadcasts: BroadcastsRepository;
      clock: Clock;
      progress: ProgressAnnouncer;
    },
  ) {}

  /** The funnel counts the messages of broadcasts only. */
  observes(row: MessageRow): boolean {
    return row.broadcast_id !== null;
  }

  async outboundChanged(
    trx: Tx,
    accountId: string,
    changes: { row: MessageRow; from: MessageStatus }[],
  ): Promise<void> {
    const deltas = new Map<
      string,
      { sent: number; delivered: number; read: number; failed: number }
    >();
    for (const { row, from } of changes) {
      if (!row.broadcast_id) continue;
      const d = deltas.get(row.broadcast_id) ?? { sent: 0, delivered: 0, read: 0, failed: 0 };
      const to = row.status;
      if (to === 'failed') {
        d.failed++;
      } else {
        if (LEVEL[from] < 1 && LEVEL[to] >= 1) d.sent++;
        if (LEVEL[from] < 2 && LEVEL[to] >= 2) d.delivered++;
        if (LEVEL[from] < 3 && LEVEL[to] >= 3) d.read++;
      }
      deltas.set(row.broadcast_id, d);
    }
    const now = this.deps.clock.now();
    // In id order, so that concurrent transactions lock broadcasts in one order.
    for (const broadcastId of [...deltas.keys()].sort())
      await this.deps.broadcasts.addStats(
        trx,
        accountId,
        broadcastId,
        deltas.get(broadcastId)!,
        now,
      );
    await this.deps.progress.announce(trx, accountId, [...deltas.keys()]);
  }

  async inboundReceived(
    trx: Tx,
    accountId: string,
    conversationIds: string[],
    at: Date,
  ): Promise<void> {
    const replies = new Map<string, number>();
    for (const broadcastId of await this.deps.broadcasts.markReplied(
      trx,
      accountId,
      conversationIds,
      at,
    ))
      replies.set(broadcastId, (replies.get(broadcastId) ?? 0) + 1);
    // In id order, as outboundChanged locks them.
    for (const broadcastId of [...replies.keys()].sort())
      await this.deps.broadcasts.addStats(
        trx,
        accountId,
        broadcastId,
        { replied: replies.get(broadcastId)! },
        at,
      );
    await this.deps.progress.announce(trx, accountId, [...replies.keys()]);
  }
}
