import type { FastifyBaseLogger } from 'fastify';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import type { Channel, ConnectionProvider } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError } from '../errors.js';
import type { PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import { CHANNELS } from '../channels/channel.js';
import { checkCredentials } from '../channels/credential-checks.js';
import type { GraphClient } from '../channels/meta/graph-client.js';
import type { ConnectionRow, ConnectionsRepository } from './connections.repository.js';
import type { ConnectBody, Connection, WebchatConnectBody } from './connections.schema.js';
import type { SecretBox } from './secret-box.js';
import {
  newIdentitySecret,
  newWidgetKey,
  readWebchatSettings,
  webchatSettings,
} from '../webchat/webchat-settings.js';

/** The one provider that can connect each channel. */
const PROVIDER_OF: Record<Channel, ConnectionProvider> = {
  whatsapp: 'whatsapp_cloud',
  messenger: 'messenger',
  instagram: 'instagram',
  webchat: 'webchat',
};

/** A verify token Meta echoes in its webhook handshake: 32 random bytes, URL-safe. */
export function newVerifyToken(): string {
  return randomBytes(32).toString('base64url');
}

export class ConnectionsService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      connections: ConnectionsRepository;
      graph: GraphClient;
      /** Seals the secrets; null without SECRETS_KEY, and then no real provider can connect. */
      secretBox: SecretBox | null;
      clock: Clock;
      /** PUBLIC_URL, the base of every webhook_url. */
      publicUrl: string;
      sandboxEnabled: boolean;
      /** Told after a connection of this process changed (the resolver forgets its provider). */
      changed: (accountId: string, channel: Channel) => void;
      /** Webchat visitors: identifications end with the identity secret that vouched for them. */
      visitors: { forgetIdentities(accountId: string, now: Date): Promise<number> };
      log: FastifyBaseLogger;
    },
  ) {}

  async list(scope: Scope): Promise<PageResult<Connection>> {
    const rows = await this.deps.connections.listForAccount(scope.accountId);
    const data = CHANNELS.map((channel) => {
      const row = rows.find((r) => r.channel === channel);
      return row ? this.toConnection(row) : this.unconnected(channel);
    });
    return { data, total: data.length, page: 1 };
  }

  async get(scope: Scope, channel: Channel): Promise<Connection> {
    const row = await this.deps.connections.findByChannel(scope.accountId, channel);
    return row ? this.toConnection(row) : this.unconnected(channel);
  }

  /** Connects the channel, or replaces its credentials; the id and verify token stay. */
  async connect(scope: Scope, channel: Channel, body: ConnectBody): Promise<Connection> {
    if (body.provider !== PROVIDER_OF[channel]) {
      throw new AppError(
        'validation_error',
        `provider ${body.provider} cannot connect the ${channel} channel; use ${PROVIDER_OF[channel]}`,
        422,
        [{ field: 'provider', issue: `must be ${PROVIDER_OF[channel]} on ${channel}` }],
      );
    }
    const box = this.deps.secretBox;
    if (!box) {
      throw new AppError(
        'validation_error',
        'SECRETS_KEY must be set before connecting a real provider: its credentials are stored encrypted under it',
        422,
        [{ field: 'provider', issue: 'the service has no SECRETS_KEY' }],
      );
    }
    if (body.provider === 'webchat') return this.connectWebchat(scope, body, box);
    // Graph is asked before the transaction: no lock or pooled connection waits on the network.
    const checked = await checkCredentials(this.deps.graph, body);
    const row = await this.deps.tx.run(scope, async (trx) => {
      const now = this.deps.clock.now();
      return this.deps.connections.upsert(trx, {
        account_id: scope.accountId,
        id: newId('chn'),
        channel,
        provider: body.provider,
        status: 'active',
        error: null,
        settings: checked.settings,
        secrets: box.seal(checked.secrets),
        verify_token: newVerifyToken(),
        created_at: now,
        updated_at: now,
      });
    });
    this.deps.changed(scope.accountId, channel);
    return this.toConnection(row);
  }

  /**
   * Webchat has no provider to ask: the settings are checked here, the widget key made once and
   * kept, and the identity secret made on the first connection (or on request) and shown only
   * in that response.
   */
  private async connectWebchat(
    scope: Scope,
    body: WebchatConnectBody,
    box: SecretBox,
  ): Promise<Connection> {
    const { row, identitySecret } = await this.deps.tx.run(scope, async (trx) => {
      // Two first connections at once must not hand out two secrets of which one is kept.
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`webchat ${scope.accountId}`}))`.execute(
        trx,
      );
      const existing = await this.deps.connections.findByChannel(scope.accountId, 'webchat', trx);
      const kept = existing ? readWebchatSettings(existing.settings) : null;
      const settings = webchatSettings(body, {
        widgetKey: kept?.widget_key ?? newWidgetKey(scope.accountId),
        widgetUrl: `${this.deps.publicUrl}/widget.js`,
      });
      const sealed = existing?.secrets ?? null;
      const fresh = sealed === null || body.rotate_identity_secret === true;
      const identitySecret = fresh ? newIdentitySecret() : this.openIdentitySecret(box, sealed);
      const now = this.deps.clock.now();
      const row = await this.deps.connections.upsert(trx, {
        account_id: scope.accountId,
        id: newId('chn'),
        channel: 'webchat',
        provider: 'webchat',
        status: 'active',
        error: null,
        settings: { ...settings },
        secrets: fresh ? box.seal({ identity_secret: identitySecret }) : sealed,
        verify_token: null,
        created_at: now,
        updated_at: now,
      });
      return { row, identitySecret: fresh ? identitySecret : null };
    });
    this.deps.changed(scope.accountId, 'webchat');
    // A new secret is made because the old one may have leaked: whoever held it could have
    // identified as anyone. Visitors it identified are anonymous again, from the commit above,
    // until the site identifies them with the new one (a connection made again after a DELETE
    // too): an identification counts only while the secret that vouched for it is the
    // connection's (WebchatRepository.findVisitor). Their identifiers are cleared after, in
    // batches; what a failure leaves is anonymous all the same, and pruned when idle.
    if (identitySecret)
      await this.deps.visitors
        .forgetIdentities(scope.accountId, this.deps.clock.now())
        .catch((err: unknown) =>
          this.deps.log.warn({ err }, 'clearing outdated webchat identifications failed'),
        );
    const connection = this.toConnection(row);
    return identitySecret ? { ...connection, identity_secret: identitySecret } : connection;
  }

  /** The kept identity secret; one sealed under another SECRETS_KEY must be rotated. */
  private openIdentitySecret(box: SecretBox, sealed: Buffer): string {
    try {
      const secret = box.open(sealed).identity_secret;
      if (secret) return secret;
    } catch {
      // fall through
    }
    throw new AppError(
      'validation_error',
      'the webchat identity secret cannot be read with this SECRETS_KEY; send rotate_identity_secret: true to make a new one',
      422,
      [{ field: 'rotate_identity_secret', issue: 'the stored secret is sealed under another key' }],
    );
  }

  /** Disconnects the channel: back to the sandbox, or to unconnected without it. */
  async disconnect(scope: Scope, channel: Channel): Promise<{ success: true }> {
    const removed = await this.deps.tx.run(scope, (trx) =>
      this.deps.connections.remove(trx, scope.accountId, channel),
    );
    if (!removed) {
      throw new AppError('not_found', `the ${channel} channel is not connected`);
    }
    this.deps.changed(scope.accountId, channel);
    return { success: true };
  }

  /**
   * For the providers: the provider refused the credentials a call was made with (an expired or
   * revoked token); the connection then shows `status: "error"` and the provider's words until
   * the channel is connected again. `connection` is the row the provider was built from: a
   * refusal that arrives after its credentials were replaced changes nothing. `error` must not
   * contain a secret.
   */
  async recordRefusal(
    connection: Pick<ConnectionRow, 'account_id' | 'id' | 'channel' | 'secrets'>,
    error: string,
  ): Promise<void> {
    const marked = await this.deps.connections.markRefused(
      connection.account_id,
      connection,
      error.slice(0, 1000),
      this.deps.clock.now(),
    );
    if (marked) this.deps.changed(connection.account_id, connection.channel);
  }

  /**
   * For the sandbox endpoints, which exist only while a channel uses the sandbox: a 422 when the
   * account's channel (or the channel of the message, by id) is connected to a real provider.
   * A message that does not exist passes (its endpoint answers the 404).
   */
  async requireSandbox(
    scope: Scope,
    on: { channel: Channel } | { messageId: string },
  ): Promise<void> {
    let channel: Channel;
    let row: ConnectionRow | null | undefined;
    if ('channel' in on) {
      channel = on.channel;
      row = await this.deps.connections.findByChannel(scope.accountId, channel);
    } else {
      const found = await this.deps.connections.findForMessage(scope.accountId, on.messageId);
      if (!found) return;
      ({ channel, connection: row } = found);
    }
    if (!row) return;
    const what =
      'channel' in on ? 'the sandbox cannot act on it' : `message ${on.messageId} is on it`;
    throw new AppError(
      'validation_error',
      `the ${channel} channel is connected to a real provider (${row.provider}), not the sandbox: ${what}; its messages and statuses come from ${row.provider}`,
      422,
      [
        {
          field: 'channel' in on ? 'channel' : 'id',
          issue: `${channel} is connected to ${row.provider}`,
        },
      ],
    );
  }

  private toConnection(row: ConnectionRow): Connection {
    return {
      id: row.id,
      channel: row.channel,
      provider: row.provider,
      status: row.status,
      error: row.error,
      settings: row.settings,
      // The widget talks to the service itself: there is no provider webhook to point anywhere.
      webhook_url:
        row.provider === 'webchat' ? null : `${this.deps.publicUrl}/channels/${row.id}/webhook`,
      verify_token: row.verify_token,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
    };
  }

  /**
   * A channel without a connection. It has no id, no webhook and no dates (nothing was ever
   * made), and empty settings; its provider is the one that sends on it, the sandbox, or null
   * when the sandbox is disabled and sending there is refused.
   */
  private unconnected(channel: Channel): Connection {
    return {
      id: null,
      channel,
      provider: this.deps.sandboxEnabled ? 'sandbox' : null,
      status: 'not_connected',
      error: null,
      settings: {},
      webhook_url: null,
      verify_token: null,
      created_at: null,
      updated_at: null,
    };
  }
}
