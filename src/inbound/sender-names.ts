import type { FastifyBaseLogger } from 'fastify';
import { ProfileLookupError, type InboundAdapter } from '../channels/channel.js';
import type { ConnectionProvider } from '../db/schema.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import type { ConnectionRow } from '../connections/connections.repository.js';
import type { InboundConnections } from './inbound-connections.js';
import type { InboundSink } from './inbound-sink.js';
import type { InboundWebhooksRepository } from './inbound.repository.js';

/** How many senders' looked-up names a process remembers (see `senderName`). */
const NAMES_KEPT = 10_000;

/**
 * How long a new sender's profile lookup may hold their first message: past this (or on any
 * failure) the message is recorded without a name and a `contact.profile` job looks it up.
 */
export const PROFILE_INLINE_MS = 2_000;

/**
 * When a `contact.profile` job runs: its first attempt after the first delay (or Graph's
 * Retry-After), each further one after the next, while Graph throttles or fails for a passing
 * reason (or the sender's first message is not recorded yet); past the last it gives up, logged,
 * and the contact stays unnamed.
 */
export const PROFILE_RETRY_DELAYS_MS = [
  5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 3_600_000, 3_600_000,
];

/**
 * New senders' names (Messenger's and Instagram's webhooks name senders by id alone): looked up
 * through the connection's adapter while their first message is processed, or later by a
 * `contact.profile` job when the provider cannot answer then.
 */
export class SenderNames {
  /**
   * `{connection id}\n{sender id}` → the name looked up for a new sender (null: none, or left
   * to a `contact.profile` job), so that a sender whose first messages are processed together
   * (or retried) is looked up once, and given one job.
   */
  private readonly names = new Map<string, string | null>();

  constructor(
    private readonly deps: {
      sink: InboundSink;
      webhooks: InboundWebhooksRepository;
      jobs: JobQueue;
      connections: InboundConnections;
      adapters: Partial<Record<ConnectionProvider, InboundAdapter>>;
      log: FastifyBaseLogger;
    },
  ) {}

  /**
   * The name to create a new sender's contact with, looked up once with the connection's token: only when no contact has their id yet, and remembered per connection and
   * sender, so that their first messages (processed together, or retried) ask Graph once. The
   * lookup may take PROFILE_INLINE_MS at most; should Graph throttle, fail for a passing reason or
   * be slow, the message is recorded without a name at once (never held back, so a sender's
   * messages are recorded in the order they come) and a `contact.profile` job, written first,
   * looks the name up later (see nameSender). A lookup refused for good leaves the contact unnamed.
   */
  async nameFor(
    scope: { accountId: string },
    via: { connection: ConnectionRow; adapter: InboundAdapter; token: string | null },
    identity: string,
    log: FastifyBaseLogger,
  ): Promise<string | null> {
    const { connection, adapter, token } = via;
    const key = `${connection.id}\n${identity}`;
    const remembered = this.names.get(key);
    if (remembered !== undefined) return remembered;
    if (await this.deps.sink.knowsIdentity(scope, { channel: connection.channel, identity }))
      return null;
    let name: string | null = null;
    if (token !== null && adapter.lookUpName) {
      try {
        name = await adapter.lookUpName(identity, {
          token,
          signal: AbortSignal.timeout(PROFILE_INLINE_MS),
        });
      } catch (err) {
        if (!(err instanceof ProfileLookupError)) throw err;
        await this.deps.connections.tokenRefused(connection, err.tokenRefused);
        if (err.final) {
          log.warn(
            { identity, reason: err.message },
            'sender profile not available; contact created without a name',
          );
        } else {
          // Written before the message is recorded: should this process die in between, the
          // job still names the contact the webhook's retry records.
          await this.deps.webhooks.insertJobs(
            this.deps.jobs.rowsOf([
              {
                accountId: scope.accountId,
                kind: 'contact.profile',
                payload: { v: 1, connection_id: connection.id, identity },
                delayMs: Math.max(err.retryAfterMs ?? 0, PROFILE_RETRY_DELAYS_MS[0]!),
              },
            ]),
          );
          log.info(
            { identity, reason: err.message },
            'sender profile not available now; message recorded without a name, name looked up later',
          );
        }
      }
    }
    this.remember(key, name);
    return name;
  }

  private remember(key: string, name: string | null): void {
    if (this.names.size >= NAMES_KEPT) this.names.delete(this.names.keys().next().value!);
    this.names.set(key, name);
  }

  /**
   * `contact.profile`: the name of a new sender whose lookup failed when their first message
   * was recorded, looked up with the connection's token and given to
   * their contact if it still has none. Retried on PROFILE_RETRY_DELAYS_MS while Graph throttles
   * or fails for a passing reason, or while no contact has the identity yet (the message's
   * recording may be retried); given up, logged, on a final refusal or past the last delay.
   */
  async nameSender(
    accountId: string,
    payload: { connection_id: string; identity: string },
    attempt: number,
  ): Promise<JobOutcome> {
    const { identity } = payload;
    const scope = { accountId };
    const log = this.deps.log.child({ connection: payload.connection_id, identity });
    const connection = await this.deps.connections.byId(payload.connection_id);
    const adapter = connection && this.deps.adapters[connection.provider];
    if (!connection || connection.account_id !== accountId || !adapter?.lookUpName) {
      log.info('sender profile: the connection is gone; not looked up');
      return { status: 'done' };
    }
    const channel = connection.channel;
    const next = PROFILE_RETRY_DELAYS_MS[attempt];
    const later = (why: string, hintMs: number | null = null): JobOutcome => {
      if (next === undefined) {
        log.warn({ reason: why }, 'sender profile: given up; the contact stays unnamed');
        return { status: 'done' };
      }
      return { status: 'retry', afterMs: Math.max(next, hintMs ?? 0), error: why };
    };
    if (!(await this.deps.sink.knowsIdentity(scope, { channel, identity })))
      return later('no contact has this identity yet');
    const token = this.deps.connections.secretOf(connection, adapter.secretNames.token);
    if (token === null) return { status: 'done' };
    let name: string | null;
    try {
      name = await adapter.lookUpName(identity, { token });
    } catch (err) {
      if (!(err instanceof ProfileLookupError)) throw err;
      await this.deps.connections.tokenRefused(connection, err.tokenRefused);
      if (err.final) {
        log.warn({ reason: err.message }, 'sender profile refused; the contact stays unnamed');
        return { status: 'done' };
      }
      return later(`profile of sender ${identity}: ${err.message}`, err.retryAfterMs);
    }
    this.remember(`${connection.id}\n${identity}`, name);
    if (name === null) return { status: 'done' };
    const result = await this.deps.sink.nameIdentity(scope, { channel, identity, name });
    // Merged away or deleted between the two reads: nobody left to name.
    if (result === 'unknown') log.info('sender profile: no contact has this identity any more');
    return { status: 'done' };
  }
}
