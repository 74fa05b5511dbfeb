import type { FastifyBaseLogger } from 'fastify';
import { MediaDownloadError } from '../channels/channel.js';
import type { Clock } from '../clock.js';
import { AppError } from '../errors.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import type { InboundConnections } from './inbound-connections.js';
import { withoutMedia, type InboundMedia } from './inbound-media.js';
import type { InboundSink, SinkInboundMessage, TemplateStatusListener } from './inbound-sink.js';
import type { InboundWebhooksRepository } from './inbound.repository.js';
import type { ProviderIdAliasesRepository } from './provider-id-aliases.repository.js';
import type { SenderNames } from './sender-names.js';
import type { ProcessItem, ReadWebhook } from './webhook-processing.js';

/**
 * How long processing waits for what is not there yet, attempt after attempt: a media download
 * that failed for a passing reason, and a status report on a provider message id we do not know
 * yet (the report can overtake the transaction that records the id of a message just sent).
 * After the last wait the webhook is finished anyway: the message is recorded with a note
 * instead of its file, and the status report is dropped (logged).
 */
export const INBOUND_WAIT_DELAYS_MS = [2_000, 10_000, 30_000, 120_000, 600_000];

/**
 * How many of INBOUND_WAIT_DELAYS_MS a status report on a message id we do not know waits (2 s,
 * then 10 s): the time a send of ours takes to record the id it was given, not minutes. On every
 * channel reports also name messages we never sent (on Messenger and Instagram replies from the
 * Page inbox or the app; on WhatsApp messages sent from the Business app or another system on
 * the same number), and those are dropped after these waits.
 */
export const UNKNOWN_REPORT_WAITS = 2;

/**
 * A webhook on the full path, on its own: media downloaded, senders' names looked up, reports
 * applied one by one, template reviews told; what is not there yet is waited for.
 */
export class ContentProcessor {
  constructor(
    private readonly deps: {
      webhooks: InboundWebhooksRepository;
      /** Other provider ids of our messages (captions sent apart on Messenger and Instagram). */
      providerIdAliases: Pick<ProviderIdAliasesRepository, 'resolve'>;
      connections: InboundConnections;
      sink: InboundSink;
      templates: TemplateStatusListener;
      media: InboundMedia;
      names: SenderNames;
      clock: Clock;
    },
  ) {}

  /** Processes one webhook: every effect once, however often this runs. */
  async process(
    item: ProcessItem,
    { connection, adapter, content }: ReadWebhook,
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
    // The token, for the provider calls this webhook needs (files, senders' profiles).
    const token = adapter.needsToken(content)
      ? this.deps.connections.secretOf(connection, adapter.secretNames.token)
      : null;

    for (const parsed of content.messages) {
      let message = parsed;
      if ('identity' in parsed.from) {
        // Never waits: a name Graph cannot give now is left to a job, and the message recorded.
        const name = await this.deps.names.nameFor(
          scope,
          { connection, adapter, token },
          parsed.from.identity,
          log,
        );
        message = { ...parsed, from: { identity: parsed.from.identity, name } };
      }
      let recorded: SinkInboundMessage;
      try {
        recorded = await this.deps.media.withMedia(
          accountId,
          { connection, adapter, token },
          message,
        );
      } catch (err) {
        if (!(err instanceof MediaDownloadError)) throw err;
        await this.deps.connections.tokenRefused(connection, err.tokenRefused);
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

    // A report may name a message we never sent: it waits only briefly (UNKNOWN_REPORT_WAITS).
    // A loose one (Messenger's, Instagram's) may also name a caption's id, another name of the
    // message sent with it.
    const loose = adapter.looseReports;
    const mayWait = attempt <= UNKNOWN_REPORT_WAITS;
    const aliases = loose
      ? await this.deps.providerIdAliases.resolve(accountId, [
          ...content.statuses.map((s) => s.providerMessageId),
          ...(content.watermarks ?? []).flatMap((w) =>
            'providerMessageId' in w.upTo ? [w.upTo.providerMessageId] : [],
          ),
        ])
      : new Map<string, string>();
    const named = (id: string) => aliases.get(id) ?? id;
    const dropped = (what: Record<string, unknown>) =>
      loose
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
}
