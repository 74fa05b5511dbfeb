// Webhooks as the settings screens read and change them.
import { api, data } from '../../../api/client.js';
import { keys } from '../../../api/keys.js';
import type { components, paths } from '../../../api/openapi.js';
import { queryClient } from '../../../lib/query.js';

export type Webhook = components['schemas']['Webhook'];
export type WebhookWithSecret =
  paths['/v1/webhooks']['post']['responses'][201]['content']['application/json'];
export type DeliveryAttempt = components['schemas']['DeliveryAttempt'];
export type WebhookEvent =
  paths['/v1/webhooks']['post']['requestBody']['content']['application/json']['events'][number];

/** What a webhook can subscribe to, in the order the form lists them. */
export const WEBHOOK_EVENTS: WebhookEvent[] = [
  'message.received',
  'message.created',
  'message.delivered',
  'message.read',
  'message.failed',
  'conversation.assigned',
  'conversation.unassigned',
  'conversation.resolved',
  'conversation.reopened',
  'conversation.read',
  'contact.created',
  'contact.updated',
  'note.created',
  'broadcast.completed',
];

export const listWebhooks = (signal?: AbortSignal) => data(api.GET('/v1/webhooks', { signal }));

export const getWebhook = (id: string, signal?: AbortSignal) =>
  data(api.GET('/v1/webhooks/{id}', { params: { path: { id } }, signal }));

export const listDeliveries = (id: string, signal?: AbortSignal) =>
  data(
    api.GET('/v1/webhooks/{id}/deliveries', {
      params: { path: { id }, query: { limit: 100 } },
      signal,
    }),
  );

export async function createWebhook(url: string, events: WebhookEvent[]) {
  const created = await data(api.POST('/v1/webhooks', { body: { url, events } }));
  await queryClient.invalidateQueries({ queryKey: keys.webhooks() });
  return created;
}

export async function setStatus(id: string, status: 'active' | 'disabled') {
  await data(api.PATCH('/v1/webhooks/{id}', { params: { path: { id } }, body: { status } }));
  await queryClient.invalidateQueries({ queryKey: keys.webhooks() });
}

export async function deleteWebhook(id: string) {
  await data(api.DELETE('/v1/webhooks/{id}', { params: { path: { id } } }));
  queryClient.removeQueries({ queryKey: keys.webhook(id) });
  await queryClient.invalidateQueries({ queryKey: keys.webhooks(), exact: true });
}

export async function sendTestEvent(id: string) {
  const r = await data(api.POST('/v1/webhooks/{id}/test', { params: { path: { id } } }));
  await queryClient.invalidateQueries({ queryKey: keys.deliveries(id) });
  return r;
}

export async function redeliver(id: string, deliveryId: string) {
  await data(
    api.POST('/v1/webhooks/{id}/deliveries/{delivery_id}/retry', {
      params: { path: { id, delivery_id: deliveryId } },
    }),
  );
  await queryClient.invalidateQueries({ queryKey: keys.deliveries(id) });
}
