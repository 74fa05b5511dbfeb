import type { Tx } from '../db/database.js';
import type { MessageStatus } from '../db/schema.js';
import type { MessageRow } from './messages.repository.js';

/**
 * What other parts of the service hear about messages, in the transaction of the change (the
 * broadcast funnel listens here), so that messages need not know who keeps which counts.
 */
export interface MessageObserver {
  /**
   * Whether `outboundChanged` must hear of this outbound message's changes: for one it ignores,
   * the send path may record a status without opening a transaction for it.
   */
  observes(row: MessageRow): boolean;
  /** Outbound messages that moved from `from` to their row's status. */
  outboundChanged(
    trx: Tx,
    accountId: string,
    changes: { row: MessageRow; from: MessageStatus }[],
  ): Promise<void>;
  /** The contact wrote on these conversations. */
  inboundReceived(trx: Tx, accountId: string, conversationIds: string[], at: Date): Promise<void>;
}
