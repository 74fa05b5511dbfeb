import type { FastifyBaseLogger } from 'fastify';
import type { ProviderStatusReport } from '../channels/webhook-content.js';
import { runIsolated } from '../db/batcher.js';
import { AppError } from '../errors.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import { INBOUND_WAIT_DELAYS_MS, UNKNOWN_REPORT_WAITS } from './content-processor.js';
import type { InboundSink, PhoneSinkMessage } from './inbound-sink.js';
import type { ProcessResult, ReadWebhook } from './webhook-processing.js';

/** A webhook whose messages are all plain (see plainContent), on its way to receiveMany. */
export interface PlainWebhook {
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

/**
 * What a webhook says when there is nothing to it but text from senders known by phone and
 * delivery reports (WhatsApp's everyday traffic): no file to download, no profile to look up,
 * no template review or watermark, no loose reports (Messenger's, Instagram's). Null otherwise.
 */
export function plainContent({
  connection: { channel },
  adapter,
  content,
}: ReadWebhook): Pick<PlainWebhook, 'messages' | 'statuses'> | null {
  if (content.templates.length > 0 || (content.watermarks ?? []).length > 0) return null;
  // Loose reports may name a caption's id or a message we never sent: the full path resolves the
  // one and waits only briefly for the other (see ContentProcessor).
  if (adapter.looseReports) return null;
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

/**
 * Plain webhooks processed at the same time, recorded together: their messages by one
 * receiveMany per account, their delivery reports by one applyProviderStatusMany.
 */
export class PlainWebhooks {
  constructor(private readonly deps: { sink: InboundSink }) {}

  /**
   * Plain webhooks' messages recorded by one receiveMany per account, in webhook order; when a
   * group fails, each webhook is recorded again alone (runIsolated, as the Batcher does).
   * Returns each webhook's result by its place in the processing group.
   */
  async record(plain: PlainWebhook[]): Promise<Map<number, ProcessResult>> {
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
      const mayWait = p.attempt <= UNKNOWN_REPORT_WAITS;
      const waiting: string[] = [];
      for (const status of p.statuses) {
        if (applied[nextStatus++] !== 'unknown') continue;
        if (!mayWait)
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
}
