import type { Tx } from '../db/database.js';
import type { Clock } from '../clock.js';
import { newId } from '../ids.js';
import type { EventPayloads, EventType } from './event-types.js';

/** Writes events to the outbox table, always inside the transaction of the change they record. */
export class Outbox {
  constructor(private readonly clock: Clock) {}

  async record<E extends EventType>(
    trx: Tx,
    accountId: string,
    type: E,
    data: EventPayloads[E],
  ): Promise<string> {
    const id = newId('evt');
    await trx
      .insertInto('events')
      .values({
        account_id: accountId,
        id,
        type,
        data: JSON.stringify(data),
        created_at: this.clock.now(),
      })
      .execute();
    return id;
  }
}
