import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../clock.js';
import { Batcher, runIsolated } from '../db/batcher.js';
import type { ReadCache } from '../db/read-cache.js';
import type { Transactor } from '../db/transactor.js';
import { AppError, Forbidden, NotFound, Unauthorized, Unavailable } from '../errors.js';
import { newId } from '../ids.js';
import type { HeldJob, JobQueue } from '../jobs/job-queue.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import { MediaUrlRefused, type MediaService } from '../media/media.service.js';
import type {
  ConnectionRow,
  ConnectionsRepository,
} from '../connections/connections.repository.js';
import type { SecretBox } from '../connections/secret-box.js';
import type { Channel } from '../db/schema.js';
import { downloadPageAttachment } from '../channels/meta-pages/inbound-media.js';
import { parsePageWebhook } from '../channels/meta-pages/inbound.js';
import { lookUpSenderName } from '../channels/meta-pages/profiles.js';
import type { ProviderIdAliasesRepository } from './provider-id-aliases.repository.js';
import {
  classifyGraphError,
  GraphError,
  TOKEN_CODES,
  type GraphClient,
} from '../channels/meta/graph-client.js';
import { MediaDownloadError } from '../channels/channel.js';
import { downloadWhatsAppMedia } from '../channels/whatsapp/inbound-media.js';
import { parseWhatsAppWebhook } from '../channels/whatsapp/inbound.js';
import type { InboundSink, PhoneSinkMessage, TemplateStatusListener } from './inbound-sink.js';
import type {
  ProviderInboundMessage,
  ProviderStatusReport,
  ProviderWebhookContent,
} from '../channels/webhook-content.js';
import type { InboundWebhookRow, InboundWebhooksRepository } from './inbound.repository.js';
import { isValidHubSignature, sameSecret } from '../channels/meta/signature.js';

/**
 * How long processing waits for what is not there yet, attempt after attempt: a media download
 * that failed for a passing reason, and a status report on a provider message id we do not know
 * yet (the report can overtake the transaction that records the id of a message just sent).
 * After the last wait the webhook is finished anyway: the message is recorded with a note
 * instead of its file, and the status report is dropped (logged).
 */
export const INBOUND_WAIT_DELAYS_MS = [2_000, 10_000, 30_000, 120_000, 600_000];

/**
 * How many of INBOUND_WAIT_DELAYS_MS a Messenger or Instagram report on a message id we do not
 * know waits (2 s, then 10 s): there, unlike WhatsApp, reports also name messages we never sent
 * (replies from the Page inbox or the Instagram app, whose echoes are ignored), so a report is
 * only given the time a send of ours takes to record its id, not minutes.
 */
export const PAGE_UNKNOWN_WAITS = 2;

/**
 * Delays between attempts after unexpected failures (the database away); past the last one the
 * job is kept dead and its webhook stays unprocessed (`processed_at` null) with its bytes.
 */
export const INBOUND_RETRY_DELAYS_MS = [
  1_000,
  5_000,
  30_000,
  120_000,
  600_000,
  3_600_000,
  6 * 3_600_000,
];

/**
 * Webhooks a process works on right after storing them, at most (see storeMany); past this,
 * new ones wait for the job runners, so that a flood costs rows, not memory.
 */
const INLINE_MAX = 1_000;

/**
 * The lease on a webhook's job while the process that stored it works on it: should that
 * process die, a runner takes the job over when the lease ends.
 */
const INLINE_LEASE_MS = 60_000;

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

/** Webhooks processed together at most (the job runner runs up to 32 at once). */
const PROCESS_GROUP_MAX = 64;

/** One stored webhook's processing, as its job asks for it. */
interface ProcessItem {
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
type ProcessResult = { outcome: JobOutcome; jobFinished?: true } | { error: unknown };

/** A webhook whose messages are all plain (see plainMessages), on its way to receiveMany. */
interface PlainWebhook {
  /** Its place in the group. */
  index: number;
  key: { accountId: string; id: string };
  /** Its job's attempt, from 1. */
  attempt: number;
  messages: PhoneSinkMessage[];
  /** Its delivery reports (`sent` ones, which only confirm, left out). */
  statuses: Array<ProviderStatusReport & { status: 'delivered' | 'read' | 'failed' }>;
  log: FastifyBaseLogger;
}

export interface VerificationQuery {
  'hub.mode'?: string;
  'hub.verify_token'?: string;
  'hub.challenge'?: string;
}

/**
 * Provider webhooks (DESIGN §4 "Inbound provider webhooks"): the verification handshake, the
 * signed POST stored durably before it is answered, and the processing of the stored copy.
 */
export class InboundWebhooksService {
  /**
   * `{connection id}\n{sender id}` → the name looked up for a new Messenger or Instagram sender
   * (null: none, or left to a `contact.profile` job), so that a sender whose first messages are
   * processed together (or retried) is looked up once, and given one job.
   */
  private readonly names = new Map<string, string | null>();

  /**
   * Concurrent deliveries are stored together (group commit): Meta posts many webhooks at once
   * under load, and each is answered once its row and job have committed. A group that fails
   * is stored again one webhook at a time, so one cannot fail another.
   */
  private readonly stored = new Batcher<InboundWebhookRow, void>((rows) => this.storeMany(rows), {
    maxBatch: 200,
    maxConcurrent: 2,
  });

  /** Secrets opened per connection row (a cached row is opened once, not per webhook). */
  private readonly opened = new WeakMap<ConnectionRow, Record<string, string>>();

  /** Webhooks this process is working on right after storing them (see storeMany). */
  private inline = 0;
  private readonly whenSettled: Array<() => void> = [];

  /** Jobs of webhooks processed in-process, deleted together once done. */
  private readonly finishedJobs = new Batcher<HeldJob, void>(
    async (jobs) => {
      await this.deps.jobs.finishMany(this.deps.tx.db, jobs);
      return jobs.map(() => undefined);
    },
    { maxBatch: 500, maxConcurrent: 2 },
  );

  /** Connections looked up by concurrent deliveries, read in one statement. */
  private readonly connectionLookups = new Batcher<string, ConnectionRow | undefined>(
    async (ids) => {
      const rows = new Map(
        (await this.deps.connections.findManyById([...new Set(ids)])).map((c) => [c.id, c]),
      );
      return ids.map((id) => rows.get(id));
    },
    { maxBatch: 200, maxConcurrent: 2 },
  );

  /** Webhooks processed at the same time, processed together (see processGroup). */
  private readonly processing = new Batcher<ProcessItem, ProcessResult>(
    (items) => this.processGroup(items),
    { maxBatch: PROCESS_GROUP_MAX, maxConcurrent: 2 },
  );

  constructor(
    private readonly deps: {
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
      graph: GraphClient;
      mediaMaxBytes: number;
      clock: Clock;
      log: FastifyBaseLogger;
      /**
       * Told when Graph refuses the connection's token itself (a media download, a profile
       * lookup), so that the connection shows it, as for a send. Must not throw.
       */
      tokenRefused?: (connection: ConnectionRow, reason: string) => Promise<void>;
      /**
       * How many stored webhooks this process works on at once right after their commit
       * (default 1,000); 0 leaves every one to the job runners.
       */
      inlineMax?: number;
    },
  ) {}

  /** The connection with this id: cached, or read together with concurrent lookups. */
  private connectionById(id: string): Promise<ConnectionRow | undefined> {
    const load = () => this.connectionLookups.submit(id);
    return this.deps.connectionCache ? this.deps.connectionCache.get(id, load) : load();
  }

  /** Meta's subscription handshake: the challenge back when the verify token matches. */
  async verify(connectionId: string, query: VerificationQuery): Promise<string> {
    const connection = await this.connectionById(connectionId);
    if (!connection || connection.verify_token === null) throw new NotFound('channel connection');
    const token = query['hub.verify_token'];
    const challenge = query['hub.challenge'];
    if (
      query['hub.mode'] !== 'subscribe' ||
      token === undefined ||
      challenge === undefined ||
      !sameSecret(token, connection.verify_token)
    )
      throw new Forbidden(
        'hub.verify_token does not match this connection, or hub.mode is not subscribe',
      );
    return challenge;
  }

  /**
   * A signed webhook: checked against the connection's app secret over the exact bytes, then
   * stored with its processing job in one statement. Nothing is recorded for a bad signature.
   */
  async accept(connectionId: string, body: Buffer, signature: string | undefined): Promise<void> {
    const connection = await this.connectionById(connectionId);
    if (!connection) throw new NotFound('channel connection');
    const appSecret = this.appSecretOf(connection);
    if (appSecret === null) throw new NotFound('channel connection');
    if (!isValidHubSignature(signature, body, appSecret))
      throw new Unauthorized('X-Hub-Signature-256 is missing or does not match the body');
    try {
      JSON.parse(body.toString('utf8'));
    } catch {
      throw new AppError('invalid_request', 'request body is not valid JSON');
    }
    await this.stored.submit({
      account_id: connection.account_id,
      id: newId('iwh'),
      connection_id: connection.id,
      body,
      received_at: this.deps.clock.now(),
      processed_at: null,
    });
  }

  /**
   * Webhooks accepted meanwhile, stored with their jobs in one statement. This process then
   * works on them at once, their jobs leased to it meanwhile, instead of waiting for a runner to
   * claim them: the job is the webhook's safety net (a crash, a retry), not its way in. Past
   * INLINE_MAX webhooks in progress, new ones are left to the runners.
   */
  private async storeMany(rows: InboundWebhookRow[]): Promise<void[]> {
    const inline = this.inline + rows.length <= (this.deps.inlineMax ?? INLINE_MAX);
    const lease = new Date(this.deps.clock.now().getTime() + INLINE_LEASE_MS);
    const jobs = this.deps.jobs.rowsOf(
      rows.map((row) => ({
        accountId: row.account_id,
        kind: 'channel.inbound' as const,
        payload: { v: 1 as const, webhook_id: row.id },
        ...(inline ? { leasedUntil: lease } : {}),
      })),
    );
    await this.deps.webhooks.insertWithJobs(rows, jobs);
    const jobIds = jobs.map((j) => j.id);
    if (inline)
      rows.forEach((row, i) => {
        void this.processInline(row, { id: jobIds[i]!, lease });
      });
    return rows.map(() => undefined);
  }

  /**
   * A webhook just stored, processed as its job's first attempt would be, then its job settled
   * as the runner settles one: deleted when done, released for a later attempt otherwise. Should
   * even that fail, the job runs again when its lease ends.
   */
  private async processInline(
    row: InboundWebhookRow,
    job: { id: string; lease: Date },
  ): Promise<void> {
    const { account_id: accountId, id: webhookId } = row;
    this.inline++;
    const log = this.deps.log.child({ webhook: webhookId });
    try {
      let outcome: JobOutcome;
      try {
        // The row just stored: no need to read it back.
        const result = await this.processing.submit({
          accountId,
          webhookId,
          attempt: 1,
          row,
          job: { accountId, ...job },
        });
        if ('error' in result) throw result.error;
        // Deleted with the webhook's processed mark already.
        if (result.jobFinished) return;
        outcome = result.outcome;
      } catch (err) {
        log.warn({ err }, 'inbound webhook: processing failed; will retry');
        outcome = {
          status: 'retry',
          afterMs: INBOUND_RETRY_DELAYS_MS[0]!,
          error: err instanceof Error ? err.message : String(err),
        };
      }
      if (outcome.status === 'done') {
        await this.finishedJobs.submit({ accountId, id: job.id, lease: job.lease });
      } else {
        await this.deps.jobs.settle(this.deps.tx.db, accountId, job.id, job.lease, {
          done: false,
          retryAt: new Date(this.deps.clock.now().getTime() + outcome.afterMs),
          error: outcome.status === 'retry' ? outcome.error : '',
        });
      }
    } catch (err) {
      log.error({ err }, 'inbound webhook: settling its job failed; it runs when its lease ends');
    } finally {
      this.inline--;
      if (this.inline === 0) for (const resolve of this.whenSettled.splice(0)) resolve();
    }
  }

  /** Resolves once no webhook is being processed in-process (for shutdown and tests). */
  settled(): Promise<void> {
    if (this.inline === 0) return Promise.resolve();
    return new Promise((resolve) => this.whenSettled.push(resolve));
  }

  /**
   * Processes one stored webhook. Every effect takes place once however often this runs (messages
   * by provider id, statuses forward only), so a retry simply runs it again. Webhooks processed
   * at the same time share their reads, and their plain messages (text from senders known by
   * phone: WhatsApp's bulk) are recorded together (see processGroup).
   */
  async process(accountId: string, webhookId: string, attempt: number): Promise<JobOutcome> {
    const result = await this.processing.submit({ accountId, webhookId, attempt });
    if ('error' in result) throw result.error;
    return result.outcome;
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
    const found = await Promise.all(ids.map((id) => this.connectionById(id)));
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
      const content = plainContent(read.connection.channel, read.content);
      if (content !== null)
        return void plain.push({ index: i, key: keys[i]!, attempt: item.attempt, ...content, log });
      others.push(
        this.processContent(item, read.connection, read.content, log).then(
          (outcome) => void (results[i] = { outcome }),
          (error: unknown) => void (results[i] = { error }),
        ),
      );
    });
    try {
      for (const [i, result] of await this.recordPlain(plain)) {
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
   * Plain webhooks' messages recorded by one receiveMany per account, in webhook order; when a
   * group fails, each webhook is recorded again alone (runIsolated, as the Batcher does).
   * Returns each webhook's result by its place in the processing group.
   */
  private async recordPlain(plain: PlainWebhook[]): Promise<Map<number, ProcessResult>> {
    const byAccount = new Map<string, PlainWebhook[]>();
    for (const p of plain)
      byAccount.set(p.key.accountId, [...(byAccount.get(p.key.accountId) ?? []), p]);
    const results = new Map<number, ProcessResult>();
    for (const [accountId, webhooks] of byAccount) {
      const settled = await runIsolated((group) => this.recordTogether(accountId, group), webhooks);
      webhooks.forEach((p, i) => {
        const result = settled[i]!;
        results.set(p.index, 'ok' in result ? { outcome: result.ok } : { error: result.error });
      });
    }
    return results;
  }

  /**
   * One account's plain webhooks: their messages recorded by one receiveMany, then their
   * delivery reports applied by one applyProviderStatusMany. A report on a message we do not
   * know yet holds its webhook back for a later attempt, as on the full path.
   */
  private async recordTogether(accountId: string, webhooks: PlainWebhook[]): Promise<JobOutcome[]> {
    const scope = { accountId };
    const messages = webhooks.flatMap((p) => p.messages);
    const received = messages.length > 0 ? await this.deps.sink.receiveMany(scope, messages) : [];
    const statuses = webhooks.flatMap((p) => p.statuses);
    const applied =
      statuses.length > 0 ? await this.deps.sink.applyProviderStatusMany(scope, statuses) : [];
    const outcomes: JobOutcome[] = [];
    let nextMessage = 0;
    let nextStatus = 0;
    for (const p of webhooks) {
      for (const message of p.messages) {
        const result = received[nextMessage++];
        // Input that can never be recorded (a sender id that is no phone number): retrying
        // the webhook cannot change that, and must not hold up the rest of it.
        if (result instanceof AppError)
          p.log.warn(
            { message: message.providerMessageId, reason: result.message },
            'inbound message refused; skipped',
          );
      }
      const lastAttempt = p.attempt > INBOUND_WAIT_DELAYS_MS.length;
      const waiting: string[] = [];
      for (const status of p.statuses) {
        if (applied[nextStatus++] !== 'unknown') continue;
        if (lastAttempt)
          p.log.warn(
            { message: status.providerMessageId, status: status.status },
            'status report for an unknown message; dropped',
          );
        else waiting.push(`status ${status.status} of unknown message ${status.providerMessageId}`);
      }
      outcomes.push(
        waiting.length > 0
          ? {
              status: 'retry',
              afterMs: INBOUND_WAIT_DELAYS_MS[p.attempt - 1]!,
              error: `waiting for: ${waiting.join('; ')}`.slice(0, 2000),
            }
          : { status: 'done' },
      );
    }
    return outcomes;
  }

  /**
   * The webhook's connection and what its body says; null when there is nothing to process (the
   * connection is gone or cannot take webhooks, or the stored bytes are not JSON), logged.
   */
  private read(
    row: InboundWebhookRow,
    connection: ConnectionRow | undefined,
    log: FastifyBaseLogger,
  ): { connection: ConnectionRow; content: ProviderWebhookContent } | null {
    // A connection removed (or replaced by another provider) since: its webhooks mean nothing now.
    if (!connection || connection.account_id !== row.account_id) {
      log.warn('inbound webhook: its connection is gone; skipped');
      return null;
    }
    if (connection.provider === 'webchat') {
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
    // The ids the connection was made with (the PUT body's phone_number_id, business_account_id,
    // page_id, instagram_account_id).
    const settings = connection.settings;
    const idOf = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
    switch (connection.provider) {
      case 'whatsapp_cloud':
        return {
          connection,
          content: parseWhatsAppWebhook(body, {
            phoneNumberId: idOf(settings.phone_number_id) ?? '',
            businessAccountId: idOf(settings.business_account_id),
          }),
        };
      case 'messenger':
      case 'instagram':
        return {
          connection,
          content: parsePageWebhook(body, {
            channel: connection.provider,
            // Instagram entries name the professional account, or (in newer payloads) the Page.
            entryIds: [
              idOf(settings.page_id),
              connection.provider === 'instagram' ? idOf(settings.instagram_account_id) : null,
            ].filter((id): id is string => id !== null),
            skipped: (entryId) =>
              log.warn(
                { entry: entryId },
                'inbound webhook: an entry for another Page or account than this connection’s; skipped',
              ),
          }),
        };
    }
  }

  /** A webhook on the full path: media downloaded, profiles looked up, reports applied. */
  private async processContent(
    item: ProcessItem,
    connection: ConnectionRow,
    content: ProviderWebhookContent,
    log: FastifyBaseLogger,
  ): Promise<JobOutcome> {
    const { accountId, webhookId, attempt } = item;
    const finish = async () => {
      await this.deps.webhooks.markProcessed(accountId, webhookId, this.deps.clock.now());
      return { status: 'done' } as const;
    };
    const lastAttempt = attempt > INBOUND_WAIT_DELAYS_MS.length;
    const waiting: string[] = [];
    const scope = { accountId };
    // WhatsApp media need the token; Messenger and Instagram need it for senders' profiles.
    const token =
      connection.provider === 'whatsapp_cloud'
        ? content.messages.some((m) => m.media)
          ? this.secretOf(connection, 'access_token')
          : null
        : content.messages.length > 0
          ? this.secretOf(connection, 'page_access_token')
          : null;

    for (const parsed of content.messages) {
      let message = parsed;
      if ('identity' in parsed.from) {
        // Never waits: a name Graph cannot give now is left to a job, and the message recorded.
        const name = await this.senderName(scope, connection, token, parsed.from.identity, log);
        message = { ...parsed, from: { identity: parsed.from.identity, name } };
      }
      let recorded: Parameters<InboundSink['receive']>[1];
      try {
        recorded = await this.withMedia(accountId, connection, token, message);
      } catch (err) {
        if (!(err instanceof MediaDownloadError)) throw err;
        if (err.tokenRefused !== null) await this.deps.tokenRefused?.(connection, err.tokenRefused);
        if (!err.final && !lastAttempt) {
          waiting.push(`media of ${message.providerMessageId}: ${err.message}`);
          continue;
        }
        log.warn(
          { message: message.providerMessageId, reason: err.message },
          'inbound media not kept; recorded with a note',
        );
        recorded = withoutMedia(connection.channel, message, err.message);
      }
      try {
        await this.deps.sink.receive(scope, recorded);
      } catch (err) {
        // Input that can never be recorded (a sender id that is no phone number): retrying the
        // webhook cannot change that, and must not hold up the rest of it.
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        log.warn(
          { message: message.providerMessageId, reason: err.message },
          'inbound message refused; skipped',
        );
      }
    }

    // On Messenger and Instagram a report may name a caption's id (another name of the message
    // sent with it), or a message we never sent: it waits only briefly (PAGE_UNKNOWN_WAITS).
    const pages = connection.provider === 'messenger' || connection.provider === 'instagram';
    const mayWait = !lastAttempt && (!pages || attempt <= PAGE_UNKNOWN_WAITS);
    const aliases = pages
      ? await this.deps.providerIdAliases.resolve(accountId, [
          ...content.statuses.map((s) => s.providerMessageId),
          ...(content.watermarks ?? []).flatMap((w) =>
            'providerMessageId' in w.upTo ? [w.upTo.providerMessageId] : [],
          ),
        ])
      : new Map<string, string>();
    const named = (id: string) => aliases.get(id) ?? id;
    const dropped = (what: Record<string, unknown>) =>
      pages
        ? log.info(
            what,
            'report names no message we sent (a reply sent outside Switchboard?); dropped',
          )
        : log.warn(what, 'status report for an unknown message; dropped');

    for (const status of content.statuses) {
      // `sent` confirms what an accepted message already is.
      if (status.status === 'sent') continue;
      const result = await this.deps.sink.applyProviderStatus(scope, {
        providerMessageId: named(status.providerMessageId),
        status: status.status,
        reason: status.reason,
      });
      if (result !== 'unknown') continue;
      if (!mayWait) dropped({ message: status.providerMessageId, status: status.status });
      else waiting.push(`status ${status.status} of unknown message ${status.providerMessageId}`);
    }

    for (const mark of content.watermarks ?? []) {
      const result = await this.deps.sink.applyStatusUpTo(scope, {
        channel: connection.channel,
        identity: mark.identity,
        status: mark.status,
        upTo:
          'providerMessageId' in mark.upTo
            ? { providerMessageId: named(mark.upTo.providerMessageId) }
            : mark.upTo,
      });
      if (result !== 'unknown') continue;
      // A read by message id may overtake the recording of that message's id, as statuses do; a
      // watermark from someone we have no conversation with names nothing we sent.
      if ('providerMessageId' in mark.upTo && mayWait)
        waiting.push(`${mark.status} up to unknown message ${mark.upTo.providerMessageId}`);
      else if ('providerMessageId' in mark.upTo)
        dropped({
          identity: mark.identity,
          message: mark.upTo.providerMessageId,
          status: mark.status,
        });
      else
        log.warn(
          { identity: mark.identity, status: mark.status },
          'report on messages up to a point names nothing we know; dropped',
        );
    }

    for (const template of content.templates)
      await this.deps.templates.onTemplateStatus(accountId, template);

    if (waiting.length > 0) {
      return {
        status: 'retry',
        afterMs: INBOUND_WAIT_DELAYS_MS[attempt - 1]!,
        error: `waiting for: ${waiting.join('; ')}`.slice(0, 2000),
      };
    }
    return finish();
  }

  /** The message as the sink records it, its file downloaded and kept first (once). */
  private async withMedia(
    accountId: string,
    connection: ConnectionRow,
    token: string | null,
    message: ProviderInboundMessage,
  ): Promise<Parameters<InboundSink['receive']>[1]> {
    const recorded = {
      channel: connection.channel,
      from: message.from,
      type: message.type,
      content: message.content,
      mediaUrl: null as string | null,
      providerMessageId: message.providerMessageId,
      sentAt: message.sentAt ?? null,
    };
    if (!message.media) return recorded;
    const media = this.deps.media;
    const id = media.idFor(accountId, `${connection.channel}\n${message.providerMessageId}`);
    if (!(await media.has(accountId, id))) {
      const source = message.media;
      let file;
      try {
        if ('url' in source) {
          file = await downloadPageAttachment(this.deps.graph, {
            url: source.url,
            maxBytes: this.deps.mediaMaxBytes,
            checkUrl: (url) => media.checkDownloadUrl(url),
          });
        } else {
          if (token === null)
            throw new MediaDownloadError('the connection has no access token', true);
          file = await downloadWhatsAppMedia(this.deps.graph, {
            token,
            mediaId: source.providerMediaId,
            maxBytes: this.deps.mediaMaxBytes,
            checkUrl: (url) => media.checkDownloadUrl(url),
          });
        }
      } catch (err) {
        if (err instanceof MediaUrlRefused) throw new MediaDownloadError(err.message, true);
        if (err instanceof MediaDownloadError) throw err;
        throw new MediaDownloadError(err instanceof Error ? err.message : String(err), false);
      }
      await media.keep(accountId, id, {
        contentType: file.contentType ?? message.media.mimeType ?? 'application/octet-stream',
        filename: message.media.filename,
        bytes: file.bytes,
      });
    }
    return { ...recorded, mediaUrl: media.urlOf(id) };
  }

  /**
   * The name to create a new Messenger or Instagram sender's contact with, looked up once with
   * the page token: only when no contact has their id yet, and remembered per connection and
   * sender, so that their first messages (processed together, or retried) ask Graph once. The
   * lookup may take PROFILE_INLINE_MS at most; should Graph throttle, fail for a passing reason or
   * be slow, the message is recorded without a name at once (never held back, so a sender's
   * messages are recorded in the order they come) and a `contact.profile` job, written first,
   * looks the name up later (see nameSender). A lookup refused for good leaves the contact unnamed.
   */
  private async senderName(
    scope: { accountId: string },
    connection: ConnectionRow,
    token: string | null,
    identity: string,
    log: FastifyBaseLogger,
  ): Promise<string | null> {
    const key = `${connection.id}\n${identity}`;
    const remembered = this.names.get(key);
    if (remembered !== undefined) return remembered;
    if (await this.deps.sink.knowsIdentity(scope, { channel: connection.channel, identity }))
      return null;
    let name: string | null = null;
    if (
      token !== null &&
      (connection.channel === 'messenger' || connection.channel === 'instagram')
    ) {
      try {
        name = await lookUpSenderName(this.deps.graph, {
          channel: connection.channel,
          token,
          senderId: identity,
          signal: AbortSignal.timeout(PROFILE_INLINE_MS),
        });
      } catch (err) {
        if (!(err instanceof GraphError)) throw err;
        await this.tokenRefusal(connection, err);
        if (classifyGraphError(err) === 'final') {
          log.warn(
            { identity, reason: err.describe() },
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
            { identity, reason: err.describe() },
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
   * `contact.profile`: the name of a new Messenger or Instagram sender whose lookup failed when
   * their first message was recorded, looked up with the connection's page token and given to
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
    const connection = await this.connectionById(payload.connection_id);
    if (
      !connection ||
      connection.account_id !== accountId ||
      (connection.provider !== 'messenger' && connection.provider !== 'instagram')
    ) {
      log.info('sender profile: the connection is gone; not looked up');
      return { status: 'done' };
    }
    const channel = connection.provider;
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
    const token = this.secretOf(connection, 'page_access_token');
    if (token === null) return { status: 'done' };
    let name: string | null;
    try {
      name = await lookUpSenderName(this.deps.graph, { channel, token, senderId: identity });
    } catch (err) {
      if (!(err instanceof GraphError)) throw err;
      await this.tokenRefusal(connection, err);
      if (classifyGraphError(err) === 'final') {
        log.warn({ reason: err.describe() }, 'sender profile refused; the contact stays unnamed');
        return { status: 'done' };
      }
      return later(`profile of sender ${identity}: ${err.describe()}`, err.retryAfterMs);
    }
    this.remember(`${connection.id}\n${identity}`, name);
    if (name === null) return { status: 'done' };
    const result = await this.deps.sink.nameIdentity(scope, { channel, identity, name });
    // Merged away or deleted between the two reads: nobody left to name.
    if (result === 'unknown') log.info('sender profile: no contact has this identity any more');
    return { status: 'done' };
  }

  /** Graph's refusal of the connection's token itself, shown on the connection. */
  private async tokenRefusal(connection: ConnectionRow, err: GraphError): Promise<void> {
    if (err.code !== null && TOKEN_CODES.has(err.code))
      await this.deps.tokenRefused?.(connection, err.describe());
  }

  private appSecretOf(connection: ConnectionRow): string | null {
    return this.secretOf(connection, 'app_secret');
  }

  /** One secret of the connection; null when it has none. A box that cannot be opened is our fault. */
  private secretOf(connection: ConnectionRow, name: string): string | null {
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
}

/**
 * What a webhook says when there is nothing to it but text from senders known by phone and
 * delivery reports (WhatsApp's everyday traffic): no file to download, no profile to look up,
 * no template review or watermark, not Messenger's or Instagram's. Null otherwise.
 */
function plainContent(
  channel: Channel,
  content: ProviderWebhookContent,
): Pick<PlainWebhook, 'messages' | 'statuses'> | null {
  if (content.templates.length > 0 || (content.watermarks ?? []).length > 0) return null;
  // Messenger and Instagram reports may name a caption's id or a message we never sent: the full
  // path resolves the one and waits only briefly for the other (see processContent).
  if (channel === 'messenger' || channel === 'instagram') return null;
  const messages: PhoneSinkMessage[] = [];
  for (const m of content.messages) {
    if (m.media !== null || !('phone' in m.from)) return null;
    messages.push({
      channel,
      from: m.from,
      type: m.type,
      content: m.content,
      mediaUrl: null,
      providerMessageId: m.providerMessageId,
      sentAt: m.sentAt ?? null,
    });
  }
  const statuses: PlainWebhook['statuses'] = [];
  // `sent` confirms what an accepted message already is.
  for (const s of content.statuses)
    if (s.status !== 'sent') statuses.push({ ...s, status: s.status });
  return { messages, statuses };
}

/** A message whose file could not be kept: recorded as text that says so, caption and all. */
function withoutMedia(
  channel: Channel,
  message: ProviderInboundMessage,
  reason: string,
): Parameters<InboundSink['receive']>[1] {
  const kind = message.media?.kind ?? 'file';
  const note = `[${kind} not available: ${reason}]`;
  return {
    channel,
    from: message.from,
    type: 'text',
    content: message.content ? `${note}\n${message.content}` : note,
    mediaUrl: null,
    providerMessageId: message.providerMessageId,
    sentAt: message.sentAt ?? null,
  };
}
