import type { JobHandler } from '../jobs/job-runner.js';
import { PROFILE_RETRY_DELAYS_MS, type InboundWebhooksService } from './inbound.service.js';

/**
 * `contact.profile`: a new Messenger or Instagram sender's name, looked up after their first
 * message was recorded without it (Graph throttled, failed or was slow). The service keeps its
 * own schedule for Graph's answers (PROFILE_RETRY_DELAYS_MS); these delays are for unexpected
 * failures (the database away).
 */
export function contactProfileJob(service: InboundWebhooksService): JobHandler<'contact.profile'> {
  return {
    kind: 'contact.profile',
    retryDelaysMs: PROFILE_RETRY_DELAYS_MS,
    handle: (job) => service.nameSender(job.accountId, job.payload, job.attempts),
  };
}
