import type { JobHandler } from '../jobs/job-runner.js';
import { INBOUND_RETRY_DELAYS_MS, type InboundWebhooksService } from './inbound.service.js';

/**
 * `channel.inbound`: processes one stored provider webhook. Waiting for media and unknown
 * message ids is the service's own schedule (INBOUND_WAIT_DELAYS_MS); these delays are for
 * unexpected failures (the database away), after which the job is kept dead and its webhook
 * stays unprocessed (`processed_at` null) with its bytes.
 */
export function inboundWebhookJob(service: InboundWebhooksService): JobHandler<'channel.inbound'> {
  return {
    kind: 'channel.inbound',
    retryDelaysMs: INBOUND_RETRY_DELAYS_MS,
    handle: (job) => service.process(job.accountId, job.payload.webhook_id, job.attempts),
  };
}
