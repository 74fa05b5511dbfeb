import type { ReadCache } from '../db/read-cache.js';
import type { Channel, ConnectionProvider } from '../db/schema.js';
import { AppError } from '../errors.js';
import type { ChannelProvider, ProviderResolver, ResolvedProvider } from '../channels/channel.js';
import type { ConnectionRow, ConnectionsRepository } from './connections.repository.js';
import type { SecretBox } from './secret-box.js';

/** Builds the provider of one connection from its row and its opened secrets. */
export type ProviderFactory = (c: {
  row: ConnectionRow;
  secrets: Record<string, string>;
}) => ChannelProvider;

/** The topic of the cache feed that announces connection changes (`connection <account> <channel>`). */
export const CONNECTION_TOPIC = 'connection';

/** The cache key of an account's channel, as the migrations' triggers notify it. */
export function connectionCacheKey(accountId: string, channel: Channel): string {
  return `${accountId} ${channel}`;
}

/**
 * Chooses the provider of each send from the account's connection: the connected provider,
 * built once and kept (per account and channel) until the connection changes in any process;
 * the sandbox on an unconnected channel while it is enabled; otherwise a 422.
 */
export class ConnectionProviderResolver implements ProviderResolver {
  constructor(
    private readonly deps: {
      connections: ConnectionsRepository;
      /** Opens the connections' secrets; null when no SECRETS_KEY is configured. */
      secretBox: SecretBox | null;
      sandbox: ChannelProvider;
      sandboxEnabled: boolean;
      factories: Partial<Record<ConnectionProvider, ProviderFactory>>;
      /** Subscribed to CONNECTION_TOPIC on the cache feed; keyed by connectionCacheKey. */
      cache: ReadCache<ResolvedProvider>;
      /** Tests only: these channels use these providers, whatever is connected. */
      overrides?: Partial<Record<Channel, ChannelProvider>>;
    },
  ) {}

  async resolve(accountId: string, channel: Channel): Promise<ChannelProvider> {
    return (await this.resolveWithConnection(accountId, channel)).provider;
  }

  async resolveWithConnection(accountId: string, channel: Channel): Promise<ResolvedProvider> {
    const override = this.deps.overrides?.[channel];
    if (override) return { provider: override, connectionId: null };
    const resolved = await this.deps.cache.get(connectionCacheKey(accountId, channel), () =>
      this.load(accountId, channel),
    );
    if (resolved) return resolved;
    throw new AppError(
      'validation_error',
      `the ${channel} channel is not connected; connect it with PUT /v1/channels/${channel}`,
      422,
      [{ field: 'channel', issue: `${channel} is not connected` }],
    );
  }

  /** Drops what this process keeps for the channel; the connection changed here. */
  forget(accountId: string, channel: Channel): void {
    this.deps.cache.invalidate(connectionCacheKey(accountId, channel));
  }

  /** The provider, or undefined (not kept) when the channel has none. */
  private async load(accountId: string, channel: Channel): Promise<ResolvedProvider | undefined> {
    const row = await this.deps.connections.findByChannel(accountId, channel);
    if (!row)
      return this.deps.sandboxEnabled
        ? { provider: this.deps.sandbox, connectionId: null }
        : undefined;
    const factory = this.deps.factories[row.provider];
    if (!factory) {
      throw new AppError(
        'validation_error',
        `the ${channel} channel is connected to ${row.provider}, which this service cannot send through`,
        422,
        [{ field: 'channel', issue: `no ${row.provider} provider in this service` }],
      );
    }
    return { provider: factory({ row, secrets: this.open(row) }), connectionId: row.id };
  }

  private open(row: ConnectionRow): Record<string, string> {
    if (row.secrets === null) return {};
    try {
      if (!this.deps.secretBox) throw new Error('no SECRETS_KEY');
      return this.deps.secretBox.open(row.secrets);
    } catch {
      // The key changed or went missing since the channel was connected; reconnecting seals
      // the credentials under the current key.
      throw new AppError(
        'validation_error',
        `the ${row.channel} connection's credentials cannot be read with this SECRETS_KEY; connect the channel again`,
        422,
        [{ field: 'channel', issue: 'credentials sealed under another SECRETS_KEY' }],
      );
    }
  }
}
