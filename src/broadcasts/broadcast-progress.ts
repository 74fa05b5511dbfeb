import type { Clock } from '../clock.js';
import type { Tx } from '../db/database.js';
import type { Outbox } from '../events/outbox.js';
import { awaitingCheckMs, toBroadcast } from './broadcast.js';
import {
  PROGRESS_EVENT_EVERY_MS,
  type BroadcastRow,
  type BroadcastsRepository,
} from './broadcasts.repository.js';

/** Broadcasts remembered by one process as announced lately (a hint; the row is the rule). */
const RECENT_MAX = 1000;

/**
 * `broadcast.updated`: a broadcast's progress, recorded in a transaction that moves it on, at
 * most once a second per broadcast (the turn is taken on the broadcast's row, see
 * `takeProgressTurn`). A process that announced a broadcast less than a second ago does not ask
 * the database again, so most transactions of a fast fan-out add no statement.
 */
export class ProgressAnnouncer {
  private readonly recent = new Map<string, number>();

  constructor(
    private readonly deps: { broadcasts: BroadcastsRepository; outbox: Outbox; clock: Clock },
  ) {}

  /** Records `broadcast.updated` for each of these broadcasts whose turn it is (in id order). */
  async announce(trx: Tx, accountId: string, ids: string[]): Promise<void> {
    const now = this.deps.clock.now();
    for (const id of [...ids].sort()) {
      const last = this.recent.get(id);
      if (last !== undefined && now.getTime() - last < PROGRESS_EVENT_EVERY_MS) continue;
      if (!(await this.deps.broadcasts.takeProgressTurn(trx, accountId, id, now))) continue;
      this.remember(id, now.getTime());
      const b = await this.deps.broadcasts.find(accountId, id, trx);
      if (b) await this.deps.outbox.record(trx, accountId, 'broadcast.updated', toBroadcast(b));
    }
  }

  private remember(id: string, at: number): void {
    if (this.recent.size >= RECENT_MAX) {
      for (const [key, when] of this.recent)
        if (at - when >= PROGRESS_EVENT_EVERY_MS) this.recent.delete(key);
    }
    this.recent.set(id, at);
  }
}

/**
 * A broadcast's row as sending moves it on, under its lock: patched, finished once every
 * recipient's message has left, or ended early with a reason.
 */
export class BroadcastProgress {
  constructor(
    private readonly deps: { broadcasts: BroadcastsRepository; outbox: Outbox; clock: Clock },
  ) {}

  /**
   * A broadcast whose every recipient is queued (its row locked): ends it when the provider has
   * taken or refused the last of their messages (some may be retrying after throttling), else
   * says when to look again. Each look is under the broadcast's lock and sees every change
   * committed before it; the counts are read again after the last look, so that a message taken
   * meanwhile is counted in the ending status and its event.
   */
  async finishOnceSent(trx: Tx, b: BroadcastRow, now: Date): Promise<'done' | { waitMs: number }> {
    const { account_id: accountId, id } = b;
    const waiting =
      (await this.deps.broadcasts.hasLiveSendJobs(trx, accountId, id)) ||
      (await this.deps.broadcasts.hasQueuedMessages(trx, accountId, id));
    if (waiting) {
      const since = b.audience_done_at ?? now;
      return { waitMs: awaitingCheckMs(now.getTime() - since.getTime()) };
    }
    const counted = (await this.deps.broadcasts.find(accountId, id, trx))!;
    const status = counted.sent === 0 && counted.failed > 0 ? 'failed' : 'sent';
    const done = await this.patch(trx, counted, {
      status,
      failure_reason: status === 'failed' ? 'no recipient could be sent the message' : null,
      completed_at: now,
      updated_at: now,
    });
    await this.deps.outbox.record(trx, accountId, 'broadcast.completed', toBroadcast(done));
    return 'done';
  }

  /**
   * Ends a broadcast that cannot go on: `failed` with the reason, and `broadcast.completed`
   * when it had begun (one that never sent anything does not announce a completion).
   */
  async end(
    trx: Tx,
    accountId: string,
    id: string,
    reason: string,
    announce: boolean,
  ): Promise<void> {
    const b = await this.deps.broadcasts.lock(trx, accountId, id);
    if (!b || (b.status !== 'sending' && b.status !== 'scheduled')) return;
    const now = this.deps.clock.now();
    const done = await this.patch(trx, b, {
      status: 'failed',
      failure_reason: reason.slice(0, 2000),
      completed_at: now,
      updated_at: now,
    });
    if (announce)
      await this.deps.outbox.record(trx, accountId, 'broadcast.completed', toBroadcast(done));
  }

  /** Updates the locked broadcast `b`; answers it as it now stands, with its counts as read. */
  async patch(
    trx: Tx,
    b: BroadcastRow,
    patch: Parameters<BroadcastsRepository['update']>[3],
  ): Promise<BroadcastRow> {
    await this.deps.broadcasts.update(trx, b.account_id, b.id, patch);
    return { ...b, ...patch };
  }
}
