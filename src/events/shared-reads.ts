import { eventBody } from '../webhooks/signing.js';
import type {
  EventsRepository,
  StreamBatch,
  StreamPosition,
  StreamedEvent,
} from './events.repository.js';

/**
 * The event reads of a process's live streams, shared: streams of one account that ask for the
 * events after the same place while a read of them is under way get that read's answer instead
 * of one each. That is the common case, not a lucky one: the feed wakes every stream of the
 * account at once, and every stream that has caught up stands after the same event. So 50
 * agents watching one account cost one read per commit, not 50, and each event's bytes are
 * made once for all of them. A stream that is behind (resuming, or a slow client) reads for
 * itself until it stands where the others do.
 *
 * Nothing is kept once a read is answered: a stream asking a moment later reads again, and
 * may find newer events.
 */
export class SharedEventReads {
  private readonly underway = new Map<string, Promise<StreamBatch>>();
  private readonly bodies = new WeakMap<StreamedEvent, string>();

  constructor(private readonly events: EventsRepository) {}

  /** The account's next `limit` settled events after `after` (EventsRepository.readAfter). */
  readAfter(accountId: string, after: StreamPosition, limit: number): Promise<StreamBatch> {
    const key = `${accountId} ${after.xid} ${after.seq} ${limit}`;
    let read = this.underway.get(key);
    if (!read) {
      read = this.events
        .readAfter(accountId, after, limit)
        .finally(() => this.underway.delete(key));
      this.underway.set(key, read);
    }
    return read;
  }

  /** The event in the webhook envelope, as the stream sends it: made once per event read. */
  body(event: StreamedEvent): string {
    let body = this.bodies.get(event);
    if (body === undefined) {
      body = eventBody(event).toString();
      this.bodies.set(event, body);
    }
    return body;
  }
}
