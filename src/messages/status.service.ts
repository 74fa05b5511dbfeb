import type { StatusUpdate } from '../channels/channel.js';
import type { Clock } from '../clock.js';
import type { Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import type { MessageObserver } from './message-observer.js';
import { toMessage } from './messages.present.js';
import type { MessageRow, MessagesRepository } from './messages.repository.js';
import type { Message } from './messages.schema.js';
import { FORWARD_FROM, type StatusRepository } from './status.repository.js';

/** The event of each status a delivery report moves a message to. */
const STATUS_EVENTS = {
  delivered: 'message.delivered',
  read: 'message.read',
  failed: 'message.failed',
} as const;

/**
 * Status updates: delivery reports on outbound messages (by our id, by the provider's, many at
 * once, or up to a point), each moving a message forward only, with its event.
 */
export class StatusService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      messages: MessagesRepository;
      statuses: StatusRepository;
      observer: MessageObserver;
      outbox: Outbox;
      clock: Clock;
    },
  ) {}

  /**
   * A provider's delivery report. Statuses only move forward; a repeated, late or backward
   * update leaves the message as it is and emits nothing.
   */
  async applyStatus(scope: Scope, update: StatusUpdate): Promise<Message> {
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.messages.find(scope.accountId, update.messageId, trx);
      if (!current) throw new NotFound('message', update.messageId);
      if (current.direction !== 'outbound')
        throw new ValidationError('status', 'only outbound messages have a delivery status');
      return toMessage(await this.advance(trx, scope.accountId, current.id, update));
    });
  }

  /**
   * A status report naming the message by the provider's id. `sent` confirms what is already
   * so. Answers null when no message has that id (yet: the report may overtake the provider's
   * answer to the send), so that the caller can try again later.
   */
  async applyProviderStatus(
    scope: Scope,
    report: {
      providerMessageId: string;
      status: 'sent' | 'delivered' | 'read' | 'failed';
      reason?: string;
    },
  ): Promise<Message | null> {
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.messages.findByProviderId(
        trx,
        scope.accountId,
        report.providerMessageId,
      );
      if (!current || current.direction !== 'outbound') return null;
      if (report.status === 'sent') return toMessage(current);
      return toMessage(
        await this.advance(trx, scope.accountId, current.id, {
          messageId: current.id,
          status: report.status,
          reason: report.reason,
        }),
      );
    });
  }

  /**
   * Delivery reports naming messages by the provider's id, applied as applyProviderStatus
   * applies each (forward only, each move with its event, the broadcast funnel told), in one
   * transaction and a few statements however many: several reports on one message apply in
   * order. Each result says whether its report moved its message, changed nothing, or names no
   * outbound message of the account (yet).
   */
  async applyProviderStatusMany(
    scope: Scope,
    reports: {
      providerMessageId: string;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    }[],
  ): Promise<Array<'applied' | 'unchanged' | 'unknown'>> {
    if (reports.length === 0) return [];
    return this.deps.tx.run(scope, async (trx) => {
      const rows = await this.deps.statuses.lockByProviderIds(trx, scope.accountId, [
        ...new Set(reports.map((r) => r.providerMessageId)),
      ]);
      const byProviderId = new Map(rows.map((r) => [r.provider_message_id!, r]));
      return this.applyReports(
        trx,
        scope.accountId,
        reports.map((r) => ({ ...r, row: byProviderId.get(r.providerMessageId) })),
      );
    });
  }

  /**
   * Delivery reports naming messages by our id (the sandbox's simulated ones), applied as
   * applyProviderStatusMany applies reports, in one transaction however many.
   */
  async applyStatusMany(
    scope: Scope,
    reports: {
      messageId: string;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    }[],
  ): Promise<Array<'applied' | 'unchanged' | 'unknown'>> {
    if (reports.length === 0) return [];
    return this.deps.tx.run(scope, async (trx) => {
      const rows = await this.deps.statuses.lockByIds(trx, scope.accountId, [
        ...new Set(reports.map((r) => r.messageId)),
      ]);
      const byId = new Map(rows.map((r) => [r.id, r]));
      return this.applyReports(
        trx,
        scope.accountId,
        reports.map((r) => ({ ...r, row: byId.get(r.messageId) })),
      );
    });
  }

  /**
   * Reports on messages the caller holds locked (`row`: the message reported on, absent when
   * there is none), applied in order, forward only: one update for every message moved, the
   * broadcast funnel told, and one event per step that moved a message.
   */
  private async applyReports(
    trx: Tx,
    accountId: string,
    reports: {
      row: MessageRow | undefined;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    }[],
  ): Promise<Array<'applied' | 'unchanged' | 'unknown'>> {
    /** Each reported message: where it started, and where the reports so far have taken it. */
    const moves = new Map<
      string,
      { from: MessageRow['status']; status: MessageRow['status']; reason: string | null }
    >();
    const steps: {
      id: string;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    }[] = [];
    const results = reports.map((report) => {
      const row = report.row;
      if (!row || row.direction !== 'outbound') return 'unknown' as const;
      const move = moves.get(row.id) ?? {
        from: row.status,
        status: row.status,
        reason: row.failure_reason,
      };
      moves.set(row.id, move);
      if (!FORWARD_FROM[report.status].includes(move.status)) return 'unchanged' as const;
      move.status = report.status;
      move.reason = report.status === 'failed' ? report.reason : null;
      steps.push({ id: row.id, status: move.status, reason: move.reason });
      return 'applied' as const;
    });
    const moved = [...moves].filter(([, m]) => m.status !== m.from);
    if (moved.length === 0) return results;
    const now = this.deps.clock.now();
    const updated = new Map(
      (
        await this.deps.statuses.setStatuses(
          trx,
          accountId,
          moved.map(([id, m]) => ({ id, status: m.status, reason: m.reason })),
          now,
        )
      ).map((row) => [row.id, row]),
    );
    await this.deps.observer.outboundChanged(
      trx,
      accountId,
      moved.map(([id, m]) => ({ row: updated.get(id)!, from: m.from })),
    );
    // Each step's event shows the message as that step left it.
    await this.deps.outbox.recordMany(
      trx,
      accountId,
      steps.map((step) => ({
        type: STATUS_EVENTS[step.status],
        data: toMessage({
          ...updated.get(step.id)!,
          status: step.status,
          failure_reason: step.reason,
        }),
      })),
    );
    return results;
  }

  /**
   * A report that covers every message up to a point (Messenger's read watermark, a delivery
   * without ids, Instagram's read of one message): every outbound message of the conversation
   * on `channel` of the contact with this identity that the provider accepted, created at or
   * before the bound, moves forward, each with its event, in one transaction. `unknown` when
   * nobody has the identity or the bounding message is not known (yet).
   */
  async applyStatusUpTo(
    scope: Scope,
    report: {
      channel: Channel;
      identity: string;
      status: 'delivered' | 'read';
      upTo: { at: Date } | { providerMessageId: string };
    },
  ): Promise<'applied' | 'unchanged' | 'unknown'> {
    return this.deps.tx.run(scope, async (trx) => {
      const conversationId = await this.deps.statuses.conversationOfIdentity(
        trx,
        scope.accountId,
        report.channel,
        report.identity,
      );
      if (!conversationId) return 'unknown';
      let bound: Date;
      if ('at' in report.upTo) {
        bound = report.upTo.at;
      } else {
        const read = await this.deps.messages.findByProviderId(
          trx,
          scope.accountId,
          report.upTo.providerMessageId,
        );
        if (!read || read.conversation_id !== conversationId || read.direction !== 'outbound')
          return 'unknown';
        bound = read.created_at;
      }
      const ids = await this.deps.statuses.acceptedUpTo(
        trx,
        scope.accountId,
        conversationId,
        bound,
        report.status === 'read' ? ['sent', 'delivered'] : ['sent'],
      );
      let moved = 0;
      for (const id of ids) {
        const before = await this.deps.messages.find(scope.accountId, id, trx);
        const after = await this.advance(trx, scope.accountId, id, {
          messageId: id,
          status: report.status,
        });
        if (before && after.status !== before.status) moved++;
      }
      return moved > 0 ? 'applied' : 'unchanged';
    });
  }

  private async advance(
    trx: Tx,
    accountId: string,
    id: string,
    update: StatusUpdate,
  ): Promise<MessageRow> {
    const now = this.deps.clock.now();
    const moved = await this.deps.statuses.advanceStatus(
      trx,
      accountId,
      id,
      update.status,
      update.reason ?? null,
      now,
    );
    if (!moved) return (await this.deps.messages.find(accountId, id, trx))!;
    await this.deps.observer.outboundChanged(trx, accountId, [moved]);
    const message = toMessage(moved.row);
    await this.deps.outbox.record(trx, accountId, STATUS_EVENTS[update.status], message);
    return moved.row;
  }
}
