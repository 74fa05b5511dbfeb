import type { JobHandler } from '../jobs/job-runner.js';
import type { WebhooksService } from './webhooks.service.js';

/** `webhook.purge`: see WebhooksService.delete. */
export function webhookPurgeJob(webhooks: WebhooksService): JobHandler<'webhook.purge'> {
  return {
    kind: 'webhook.purge',
    retryDelaysMs: [60_000, 600_000, 3_600_000],
    handle: (job) => webhooks.purge(job.accountId, job.payload.webhook_id),
  };
}
