import type { FastifyBaseLogger } from 'fastify';
import type { InboundAdapter } from '../channels/channel.js';
import type { ProviderWebhookContent } from '../channels/webhook-content.js';
import type { Clock } from '../clock.js';
import { Batcher } from '../db/batcher.js';
import type { ConnectionProvider } from '../db/schema.js';
import type { HeldJob } from '../jobs/job-queue.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import type { ConnectionRow } from '../connections/connections.repository.js';
import type { ContentProcessor } from './content-processor.js';
import type { InboundConnections } from './inbound-connections.js';
import type { InboundWebhookRow, InboundWebhooksRepository } from './inbound.repository.js';
import { plainContent, type PlainWebhook, type PlainWebhooks } from './plain-webhooks.js';

/** Webhooks processed together at most (the job runner runs up to 32 at once). */
const PROCESS_GROUP_MAX = 64;

/** One stored webhook's processing, as its job asks for it. */
export interface ProcessItem {
  accountId: string;
  webhookId: string;
  /** The job's attempt, from 1. */
  attempt: number;
  /** The stored row, when the caller has it (it has just stored it); else read. */
  row?: InboundWebhookRow;
  /** The job the caller holds for it, deleted with its processed mark when it is done. */
  job?: HeldJob;
}

/** How processing a webhook ended, or why it failed (thrown back to its job alone). */
export type ProcessResult = { outcome: JobOutcome; jobFinished?: true } | { error: unknown };

/** A webhook's connection, its adapter, and what its body says in our words. */
export interface ReadWebhook {
  connection: ConnectionRow;
  adapter: InboundAdapter;
  content: ProviderWebhookContent;
}

/**
 * Processing stored webhooks: those processed at the same time are read together, their plain
 * messages recorded together (PlainWebhooks), and every other webhook takes the full path of
 * its own (ContentProcessor).
 */
export class WebhookProcessing {
  /** Webhooks processed at the same time, processed together (see processGroup). */
  private readonly processing = new Batcher<ProcessItem, ProcessResult>(
    (items) => this.processGroup(items),
    { maxBatch: PROCESS_GROUP_MAX, maxConcurrent: 2 },
  );

  constructor(
    private readonly deps: {
      webhooks: InboundWebhooksRepository;
      connections: InboundConnections;
      adapters: Partial<Record<ConnectionProvider, InboundAdapter>>;
      plain: PlainWebhooks;
      full: ContentProcessor;
      clock: Clock;
      log: FastifyBaseLogger;
    },
  ) {}

  /** One webhook's processing, done together with the others asked for meanwhile. */
  submit(item: ProcessItem): Promise<ProcessResult> {
    return this.processing.submit(item);
  }

  /**
   * Webhooks being processed at once: read in one statement with their connections; those that
   * carry only plain messages have them recorded by the sink's receiveMany (a few statements
   * for the whole group) and are marked processed in one statement; every other webhook takes
   * the full path of its own (media, profiles, statuses, waits). A group whose recording fails
   * is recorded again one webhook at a time, so that one webhook cannot fail another.
   */
  private async processGroup(items: ProcessItem[]): Promise<ProcessResult[]> {
    const keys = items.map((item) => ({ accountId: item.accountId, id: item.webhookId }));
    const rows = new Map(
      (
        await this.deps.webhooks.findMany(items.flatMap((item, i) => (item.row ? [] : [keys[i]!])))
      ).map((r) => [`${r.account_id} ${r.id}`, r]),
    );
    for (const item of items)
      if (item.row) rows.set(`${item.accountId} ${item.webhookId}`, item.row);
    const ids = [...new Set([...rows.values()].map((r) => r.connection_id))];
    const found = await Promise.all(ids.map((id) => this.deps.connections.byId(id)));
    const connectionById = new Map(ids.map((id, i) => [id, found[i]]));
    const results: ProcessResult[] = items.map(() => ({ outcome: { status: 'done' } }));
    const finished: number[] = [];
    const plain: PlainWebhook[] = [];
    const others: Array<Promise<void>> = [];
    items.forEach((item, i) => {
      const row = rows.get(`${item.accountId} ${item.webhookId}`);
      if (!row || row.processed_at !== null) return;
      const log = this.deps.log.child({ webhook: item.webhookId });
      const read = this.read(row, connectionById.get(row.connection_id), log);
      if (read === null) return void finished.push(i);
      const content = plainContent(read);
      if (content !== null)
        return void plain.push({ index: i, key: keys[i]!, attempt: item.attempt, ...content, log });
      others.push(
        this.deps.full.process(item, read, log).then(
          (outcome) => void (results[i] = { outcome }),
          (error: unknown) => void (results[i] = { error }),
        ),
      );
    });
    try {
      for (const [i, result] of await this.deps.plain.record(plain)) {
        results[i] = result;
        if ('outcome' in result && result.outcome.status === 'done') finished.push(i);
      }
      // Marked processed, and the jobs of those processed in-process deleted, in one statement.
      await this.deps.webhooks.markProcessedMany(
        finished.map((i) => keys[i]!),
        finished.flatMap((i) => {
          const job = items[i]!.job;
          return job ? [job] : [];
        }),
        this.deps.clock.now(),
      );
      for (const i of finished)
        if (items[i]!.job) results[i] = { outcome: { status: 'done' }, jobFinished: true };
    } finally {
      // Never answer before the webhooks on their own path are done: a group that failed is
      // run again, and must not run them twice at once.
      await Promise.all(others);
    }
    return results;
  }

  /**
   * The webhook's connection and what its body says; null when there is nothing to process (the
   * connection is gone or cannot take webhooks, or the stored bytes are not JSON), logged.
   */
  private read(
    row: InboundWebhookRow,
    connection: ConnectionRow | undefined,
    log: FastifyBaseLogger,
  ): ReadWebhook | null {
    // A connection removed (or replaced by another provider) since: its webhooks mean nothing now.
    if (!connection || connection.account_id !== row.account_id) {
      log.warn('inbound webhook: its connection is gone; skipped');
      return null;
    }
    const adapter = this.deps.adapters[connection.provider];
    if (!adapter) {
      log.warn(
        { provider: connection.provider },
        'inbound webhook: no processing for this provider; skipped',
      );
      return null;
    }
    let body: unknown;
    try {
      body = JSON.parse(row.body.toString('utf8'));
    } catch {
      log.warn('inbound webhook: stored body is not JSON; skipped');
      return null;
    }
    return { connection, adapter, content: adapter.parse(body, connection, log) };
  }
}
