import type { ChannelProvider } from '../../src/channels/channel.js';
import { JobRunner } from '../../src/jobs/job-runner.js';
import type { TestApp } from '../helpers.js';

/** A job runner of one account's jobs (so that no other test's work is taken). */
export function runnerOf(t: TestApp, accountId: string, leaseMs?: number): JobRunner {
  return new JobRunner({
    db: t.db,
    clock: t.clock,
    log: t.app.log,
    handlers: t.services.jobHandlers,
    accountId,
    leaseMs,
  });
}

/**
 * Queues one webchat text to each contact as a single send job, and returns the job with the
 * messages `MessagesService.dispatch` takes, for a test that then dispatches the batch itself.
 */
export async function queueWebchatBatch(
  t: TestApp,
  accountId: string,
  contacts: { id: string }[],
  provider: ChannelProvider,
) {
  const queued = await t.db.transaction().execute((trx) =>
    t.services.messages.queue(trx, accountId, {
      channel: 'webchat',
      message: { type: 'text', content: 'hello', template: null, mediaUrl: null },
      broadcastId: null,
      recipients: contacts.map((c) => ({ contactId: c.id })),
      provider,
    }),
  );
  const messages = queued.results.map((r) => ({
    row: r.row!,
    channel: 'webchat' as const,
    contactId: r.contactId,
    ...r.to!,
  }));
  return { job: queued.job, messages };
}
