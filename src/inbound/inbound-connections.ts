import type { FastifyBaseLogger } from 'fastify';
import { Batcher } from '../db/batcher.js';
import type { ReadCache } from '../db/read-cache.js';
import { Unavailable } from '../errors.js';
import type {
  ConnectionRow,
  ConnectionsRepository,
} from '../connections/connections.repository.js';
import type { SecretBox } from '../connections/secret-box.js';

/**
 * The connections webhooks arrive for: looked up by id (cached, or read together with
 * concurrent lookups), their secrets opened once per row, and Graph's refusal of a token told.
 */
export class InboundConnections {
  /** Secrets opened per connection row (a cached row is opened once, not per webhook). */
  private readonly opened = new WeakMap<ConnectionRow, Record<string, string>>();

  /** Connections looked up by concurrent deliveries, read in one statement. */
  private readonly lookups = new Batcher<string, ConnectionRow | undefined>(
    async (ids) => {
      const rows = new Map(
        (await this.deps.connections.findManyById([...new Set(ids)])).map((c) => [c.id, c]),
      );
      return ids.map((id) => rows.get(id));
    },
    { maxBatch: 200, maxConcurrent: 2 },
  );

  constructor(
    private readonly deps: {
      connections: ConnectionsRepository;
      /** Connections by id, kept correct by the cache feed (none: every lookup reads). */
      connectionCache?: ReadCache<ConnectionRow>;
      /** Null without SECRETS_KEY: no connection with secrets can exist then. */
      secrets: SecretBox | null;
      log: FastifyBaseLogger;
      /**
       * Told when the provider refuses the connection's token itself (a media download, a
       * profile lookup), so that the connection shows it, as for a send. Must not throw.
       */
      tokenRefused?: (connection: ConnectionRow, reason: string) => Promise<void>;
    },
  ) {}

  /** The connection with this id: cached, or read together with concurrent lookups. */
  byId(id: string): Promise<ConnectionRow | undefined> {
    const load = () => this.lookups.submit(id);
    return this.deps.connectionCache ? this.deps.connectionCache.get(id, load) : load();
  }

  /** One secret of the connection; null when it has none. A box that cannot be opened is our fault. */
  secretOf(connection: ConnectionRow, name: string): string | null {
    if (connection.secrets === null) return null;
    if (this.deps.secrets === null) {
      this.deps.log.error(
        { connection: connection.id },
        'connection secrets cannot be opened: SECRETS_KEY is not set',
      );
      throw new Unavailable('this connection cannot be used at the moment', 60);
    }
    let secrets = this.opened.get(connection);
    try {
      secrets ??= this.deps.secrets.open(connection.secrets);
      this.opened.set(connection, secrets);
    } catch {
      this.deps.log.error(
        { connection: connection.id },
        'connection secrets cannot be opened: wrong SECRETS_KEY?',
      );
      throw new Unavailable('this connection cannot be used at the moment', 60);
    }
    const value = secrets[name];
    return typeof value === 'string' && value !== '' ? value : null;
  }

  /** The provider's refusal of the connection's token itself, shown on the connection. */
  async tokenRefused(connection: ConnectionRow, reason: string | null): Promise<void> {
    if (reason !== null) await this.deps.tokenRefused?.(connection, reason);
  }
}
