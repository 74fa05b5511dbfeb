import type { FastifyBaseLogger } from 'fastify';
import net from 'node:net';
import type { Clock } from '../clock.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError, Conflict, NotFound, ValidationError } from '../errors.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import { isPrivateAddress } from '../net/address-guard.js';
import { newWebhookSecret } from './signing.js';
import type { SecretBox } from '../connections/secret-box.js';
import { WebhookSecrets } from './webhook-secrets.js';
import type { AttemptRow, WebhookRow, WebhooksRepository } from './webhooks.repository.js';
import type {
  CreateWebhookBody,
  DeliveryAttempt,
  UpdateWebhookBody,
  Webhook,
  WebhookTestResult,
  WebhookWithSecret,
} from './webhooks.schema.js';
import { WEBHOOK_TEST_EVENT, type WebhookTestPayload } from '../events/event-types.js';

export const MAX_WEBHOOKS_PER_ACCOUNT = 20;

/** When a deleted webhook's purge job looks for what is left (see `delete`). */
const PURGE_CHECK_MS = 60_000;

const toWebhook = (r: WebhookRow): Webhook => ({
  id: r.id,
  url: r.url,
  // Written only through the event types' enum.
  events: r.events as Webhook['events'],
  status: r.status,
  created_at: r.created_at.toISOString(),
});

const toAttempt = (r: AttemptRow): DeliveryAttempt => ({
  id: r.id,
  event_id: r.event_id,
  event: r.event_type as DeliveryAttempt['event'],
  attempt: r.attempt,
  status_code: r.status_code,
  error: r.error,
  duration_ms: r.duration_ms,
  response_excerpt: r.response_excerpt,
  next_attempt_at: r.next_attempt_at?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
});

/** Registration checks; where the name resolves is checked again at every delivery. */
function checkUrl(raw: string, allowPrivate: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ValidationError('url', 'is not a valid URL');
  }
  if (url.protocol !== 'https:') throw new ValidationError('url', 'must start with https://');
  if (url.username || url.password)
    throw new ValidationError('url', 'must not contain credentials');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // `localhost.` (fully qualified) and `*.localhost` are loopback too (RFC 6761).
  const loopbackName = /(^|\.)localhost\.?$/.test(host);
  if (!allowPrivate && (loopbackName || (net.isIP(host) && isPrivateAddress(host)))) {
    throw new ValidationError('url', 'must not point to a private, loopback or link-local address');
  }
  return url.href;
}

export class WebhooksService {
  private readonly secrets: WebhookSecrets | null;

  constructor(
    private readonly deps: {
      tx: Transactor;
      webhooks: WebhooksRepository;
      jobs: JobQueue;
      clock: Clock;
      log: FastifyBaseLogger;
      allowPrivate: boolean;
      /** Seals signing secrets; null without SECRETS_KEY, and then no webhook can be registered. */
      secretBox: SecretBox | null;
    },
  ) {
    this.secrets = deps.secretBox && new WebhookSecrets(deps.secretBox);
  }

  async create(scope: Scope, input: CreateWebhookBody): Promise<WebhookWithSecret> {
    const url = checkUrl(input.url, this.deps.allowPrivate);
    const secrets = this.secrets;
    if (!secrets) {
      throw new AppError(
        'validation_error',
        'SECRETS_KEY must be set before registering a webhook: its signing secret is stored encrypted under it',
        422,
      );
    }
    return this.deps.tx.run(scope, async (trx) => {
      await this.deps.webhooks.lockAccount(trx, scope.accountId);
      if ((await this.deps.webhooks.count(trx, scope.accountId)) >= MAX_WEBHOOKS_PER_ACCOUNT) {
        throw new AppError(
          'validation_error',
          `an account can have at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks`,
          422,
          [{ field: 'url', issue: `at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks per account` }],
        );
      }
      const now = this.deps.clock.now();
      const secret = newWebhookSecret();
      const row: WebhookRow = {
        account_id: scope.accountId,
        id: newId('wh'),
        url,
        events: input.events,
        secret_box: secrets.seal(secret),
        status: 'active',
        disabled_reason: null,
        failing_since: null,
        created_at: now,
        updated_at: now,
      };
      await this.deps.webhooks.insert(trx, row);
      return { ...toWebhook(row), secret };
    });
  }

  async list(scope: Scope): Promise<PageResult<Webhook>> {
    const rows = await this.deps.webhooks.listAll(scope.accountId);
    return { data: rows.map(toWebhook), total: rows.length, page: 1 };
  }

  async get(scope: Scope, id: string): Promise<Webhook> {
    const row = await this.deps.webhooks.find(scope.accountId, id);
    if (!row) throw new NotFound('webhook', id);
    return toWebhook(row);
  }

  async update(scope: Scope, id: string, input: UpdateWebhookBody): Promise<Webhook> {
    return this.deps.tx.run(scope, async (trx) => {
      const now = this.deps.clock.now();
      const row = await this.deps.webhooks.update(trx, scope.accountId, id, {
        ...(input.events ? { events: input.events } : {}),
        ...(input.status
          ? {
              status: input.status,
              disabled_reason: input.status === 'disabled' ? 'disabled through the API' : null,
              // Re-enabled: its failures start counting afresh, or the next one would disable it again.
              failing_since: null,
            }
          : {}),
        updated_at: now,
      });
      if (!row) throw new NotFound('webhook', id);
      if (input.status === 'disabled')
        await this.deps.webhooks.failPending(trx, scope.accountId, id, now);
      return toWebhook(row);
    });
  }

  /**
   * Deletes the webhook at once (nothing more is delivered to it), then its deliveries and
   * attempt log in batches (WebhooksRepository.purge). A `webhook.purge` job queued with the
   * deletion finishes what a failure or a restart left.
   */
  async delete(scope: Scope, id: string): Promise<{ success: true }> {
    await this.deps.tx.run(scope, async (trx) => {
      if (!(await this.deps.webhooks.delete(trx, scope.accountId, id)))
        throw new NotFound('webhook', id);
      await this.deps.jobs.enqueue(
        trx,
        scope.accountId,
        'webhook.purge',
        { v: 1, webhook_id: id },
        { delayMs: PURGE_CHECK_MS },
      );
    });
    try {
      await this.deps.webhooks.purge(scope.accountId, id);
    } catch (err) {
      this.deps.log.warn({ err, webhook: id }, 'purging a deleted webhook failed; its job retries');
    }
    return { success: true as const };
  }

  /** The `webhook.purge` job: done once nothing of the deleted webhook is left. */
  async purge(accountId: string, webhookId: string): Promise<JobOutcome> {
    return (await this.deps.webhooks.purge(accountId, webhookId))
      ? { status: 'continue', afterMs: PURGE_CHECK_MS }
      : { status: 'done' };
  }

  async listAttempts(
    scope: Scope,
    webhookId: string,
    page: PageRequest,
  ): Promise<PageResult<DeliveryAttempt>> {
    await this.get(scope, webhookId);
    const { rows, total } = await this.deps.webhooks.listAttempts(scope.accountId, webhookId, page);
    return { data: rows.map(toAttempt), total, page: page.page };
  }

  /**
   * Queues a `webhook.test` event for this webhook alone, whatever events it subscribes to: it
   * is delivered, signed, retried and logged like any other.
   */
  async sendTest(scope: Scope, webhookId: string): Promise<WebhookTestResult> {
    return this.deps.tx.run(scope, async (trx) => {
      const webhook = await this.deps.webhooks.find(scope.accountId, webhookId, trx);
      if (!webhook) throw new NotFound('webhook', webhookId);
      if (webhook.status !== 'active')
        throw new Conflict('the webhook is disabled; re-enable it with PATCH first');
      const data: WebhookTestPayload & { actor?: unknown } = {
        webhook_id: webhook.id,
        message: 'A test event sent from Switchboard; it needs no action.',
        ...(scope.actor !== undefined ? { actor: scope.actor } : {}),
      };
      const eventId = newId('evt');
      await this.deps.webhooks.insertEventFor(
        trx,
        scope.accountId,
        webhook.id,
        { id: eventId, type: WEBHOOK_TEST_EVENT, data },
        this.deps.clock.now(),
      );
      return { event_id: eventId };
    });
  }

  /** Sends the event of a logged attempt again, now, whatever became of it. */
  async retry(scope: Scope, webhookId: string, attemptId: string): Promise<{ success: true }> {
    const webhook = await this.deps.webhooks.find(scope.accountId, webhookId);
    if (!webhook) throw new NotFound('webhook', webhookId);
    if (webhook.status !== 'active')
      throw new Conflict('the webhook is disabled; re-enable it with PATCH first');
    const attempt = await this.deps.webhooks.findAttempt(scope.accountId, webhookId, attemptId);
    if (!attempt) throw new NotFound('delivery', attemptId);
    return this.deps.tx.run(scope, async (trx) => {
      if (
        !(await this.deps.webhooks.requeue(
          trx,
          scope.accountId,
          webhookId,
          attempt.event_id,
          this.deps.clock.now(),
        ))
      ) {
        throw new NotFound('event', attempt.event_id);
      }
      return { success: true as const };
    });
  }
}
