import type { FastifyBaseLogger } from 'fastify';
import type { InboundAdapter } from '../channels/channel.js';
import { inboundAdapters } from '../channels/inbound-adapters.js';
import type { GraphClient } from '../channels/meta/graph-client.js';
import type { Clock } from '../clock.js';
import type { ReadCache } from '../db/read-cache.js';
import type { ConnectionProvider } from '../db/schema.js';
import type { Transactor } from '../db/transactor.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import type { MediaService } from '../media/media.service.js';
import type {
  ConnectionRow,
  ConnectionsRepository,
} from '../connections/connections.repository.js';
import type { SecretBox } from '../connections/secret-box.js';
import { ContentProcessor } from './content-processor.js';
import { InboundConnections } from './inbound-connections.js';
import { InboundMedia } from './inbound-media.js';
import type { InboundSink, TemplateStatusListener } from './inbound-sink.js';
import type { InboundWebhooksRepository } from './inbound.repository.js';
import { PlainWebhooks } from './plain-webhooks.js';
import type { ProviderIdAliasesRepository } from './provider-id-aliases.repository.js';
import { SenderNames } from './sender-names.js';
import { WebhookIntake } from './webhook-intake.js';
import { WebhookProcessing } from './webhook-processing.js';

export { INBOUND_WAIT_DELAYS_MS, UNKNOWN_REPORT_WAITS } from './content-processor.js';
export { PROFILE_INLINE_MS, PROFILE_RETRY_DELAYS_MS } from './sender-names.js';
export { INBOUND_RETRY_DELAYS_MS } from './webhook-intake.js';

/** The handshake's query string, for the connection's adapter to read (Meta's `hub.*`). */
export type VerificationQuery = Readonly<Record<string, string | undefined>>;

/**
 * Provider webhooks (DESIGN §4 "Inbound provider webhooks"): the verification handshake, the
 * signed POST stored durably before it is answered (WebhookIntake), and the processing of the
 * stored copy (WebhookProcessing: plain webhooks together, the others on the full path with
 * their media and senders' names). What is the provider's is its connection's InboundAdapter.
 */
export class InboundWebhooksService {
  private readonly intake: WebhookIntake;
  private readonly processing: WebhookProcessing;
  private readonly names: SenderNames;

  constructor(deps: {
    tx: Transactor;
    webhooks: InboundWebhooksRepository;
    /** Other provider ids of our messages (captions sent apart on Messenger and Instagram). */
    providerIdAliases: Pick<ProviderIdAliasesRepository, 'resolve'>;
    connections: ConnectionsRepository;
    /** Connections by id, kept correct by the cache feed (none: every lookup reads). */
    connectionCache?: ReadCache<ConnectionRow>;
    /** Null without SECRETS_KEY: no connection with secrets can exist then. */
    secrets: SecretBox | null;
    jobs: JobQueue;
    sink: InboundSink;
    templates: TemplateStatusListener;
    media: MediaService;
    /** Meta's Graph API, for the Meta adapters (unless `adapters` are given). */
    graph: GraphClient;
    /** The inbound adapter of each connection provider that takes webhooks. */
    adapters?: Partial<Record<ConnectionProvider, InboundAdapter>>;
    mediaMaxBytes: number;
    clock: Clock;
    log: FastifyBaseLogger;
    /**
     * Told when the provider refuses the connection's token itself (a media download, a
     * profile lookup), so that the connection shows it, as for a send. Must not throw.
     */
    tokenRefused?: (connection: ConnectionRow, reason: string) => Promise<void>;
    /**
     * How many stored webhooks this process works on at once right after their commit
     * (default 1,000); 0 leaves every one to the job runners.
     */
    inlineMax?: number;
  }) {
    const { tx, webhooks, jobs, sink, clock, log } = deps;
    const adapters = deps.adapters ?? inboundAdapters(deps.graph);
    const connections = new InboundConnections(deps);
    this.names = new SenderNames({ sink, webhooks, jobs, connections, adapters, log });
    const full = new ContentProcessor({
      ...deps,
      connections,
      media: new InboundMedia(deps),
      names: this.names,
    });
    const plain = new PlainWebhooks({ sink });
    this.processing = new WebhookProcessing({
      webhooks,
      connections,
      adapters,
      plain,
      full,
      clock,
      log,
    });
    this.intake = new WebhookIntake({
      tx,
      webhooks,
      connections,
      adapters,
      jobs,
      process: (item) => this.processing.submit(item),
      clock,
      log,
      inlineMax: deps.inlineMax,
    });
  }

  /** The provider's subscription handshake: the challenge back when the verify token matches. */
  verify(connectionId: string, query: VerificationQuery): Promise<string> {
    return this.intake.verify(connectionId, query);
  }

  /** A signed webhook, stored with its processing job before it is answered (see WebhookIntake). */
  accept(connectionId: string, body: Buffer, signature: string | undefined): Promise<void> {
    return this.intake.accept(connectionId, body, signature);
  }

  /** Resolves once no webhook is being processed in-process (for shutdown and tests). */
  settled(): Promise<void> {
    return this.intake.settled();
  }

  /**
   * `channel.inbound`: processes one stored webhook. Every effect takes place once however often
   * this runs (messages by provider id, statuses forward only), so a retry simply runs it again.
   * Webhooks processed at the same time share their reads, and their plain messages (text from
   * senders known by phone: WhatsApp's bulk) are recorded together.
   */
  async process(accountId: string, webhookId: string, attempt: number): Promise<JobOutcome> {
    const result = await this.processing.submit({ accountId, webhookId, attempt });
    if ('error' in result) throw result.error;
    return result.outcome;
  }

  /** `contact.profile`: a new sender's name looked up later (see SenderNames). */
  nameSender(
    accountId: string,
    payload: { connection_id: string; identity: string },
    attempt: number,
  ): Promise<JobOutcome> {
    return this.names.nameSender(accountId, payload, attempt);
  }
}
