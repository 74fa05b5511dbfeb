import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { pageRequest } from '../http/pagination.js';
import { IdParams, Page, Success, errorResponses } from '../http/schemas.js';
import type { WebhooksService } from './webhooks.service.js';
import {
  CreateWebhookBody,
  DeliveryAttempt,
  DeliveryParams,
  ListDeliveriesQuery,
  UpdateWebhookBody,
  Webhook,
  WebhookTestResult,
  WebhookWithSecret,
} from './webhooks.schema.js';

export function webhooksRoutes(app: FastifyInstance, webhooks: WebhooksService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Webhooks'];

  r.post('/webhooks', {
    config: { holdsSecret: true, successStatus: 201 },
    schema: {
      tags,
      operationId: 'createWebhook',
      summary: 'Register a webhook (the secret is shown only here)',
      body: CreateWebhookBody,
      response: { 201: WebhookWithSecret, ...errorResponses(422) },
    },
    handler: async (req, reply) => reply.code(201).send(await webhooks.create(req.scope, req.body)),
  });
  r.get('/webhooks', {
    schema: {
      tags,
      operationId: 'listWebhooks',
      summary: "All of the account's webhooks, on one page",
      response: { 200: Page(Webhook), ...errorResponses() },
    },
    handler: (req) => webhooks.list(req.scope),
  });
  r.get('/webhooks/:id', {
    schema: {
      tags,
      operationId: 'getWebhook',
      summary: 'Get a webhook',
      params: IdParams,
      response: { 200: Webhook, ...errorResponses(404) },
    },
    handler: (req) => webhooks.get(req.scope, req.params.id),
  });
  r.patch('/webhooks/:id', {
    schema: {
      tags,
      operationId: 'updateWebhook',
      summary: 'Change events, or re-enable a disabled webhook',
      params: IdParams,
      body: UpdateWebhookBody,
      response: { 200: Webhook, ...errorResponses(404, 422) },
    },
    handler: (req) => webhooks.update(req.scope, req.params.id, req.body),
  });
  r.delete('/webhooks/:id', {
    schema: {
      tags,
      operationId: 'deleteWebhook',
      summary: 'Delete a webhook; its deliveries stop at once',
      params: IdParams,
      response: { 200: Success, ...errorResponses(404) },
    },
    handler: (req) => webhooks.delete(req.scope, req.params.id),
  });
  r.get('/webhooks/:id/deliveries', {
    schema: {
      tags,
      operationId: 'listWebhookDeliveries',
      summary: 'Delivery attempts, newest first',
      params: IdParams,
      querystring: ListDeliveriesQuery,
      response: { 200: Page(DeliveryAttempt), ...errorResponses(404, 422) },
    },
    handler: (req) => webhooks.listAttempts(req.scope, req.params.id, pageRequest(req.query)),
  });
  r.post('/webhooks/:id/test', {
    config: { successStatus: 202 },
    schema: {
      tags,
      operationId: 'testWebhook',
      summary:
        'Send a `webhook.test` event to this webhook only (whatever its events), signed, retried and logged like any other',
      params: IdParams,
      response: { 202: WebhookTestResult, ...errorResponses(404, 409) },
    },
    handler: async (req, reply) =>
      reply.code(202).send(await webhooks.sendTest(req.scope, req.params.id)),
  });
  r.post('/webhooks/:id/deliveries/:delivery_id/retry', {
    schema: {
      tags,
      operationId: 'retryWebhookDelivery',
      summary: "Send a delivery's event again, now",
      params: DeliveryParams,
      response: { 200: Success, ...errorResponses(404, 409) },
    },
    handler: (req) => webhooks.retry(req.scope, req.params.id, req.params.delivery_id),
  });
}
