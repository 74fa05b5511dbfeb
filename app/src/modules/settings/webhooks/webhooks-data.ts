// Webhooks as the settings screens read and change them.
import { api, data } from '../../../api/client.js';
import { keys } from '../../../api/keys.js';
import type { components, paths } from '../../../api/openapi.js';
import { queryClient, useInfiniteQuery } from '../../../lib/query.js';

export type Webhook = components['schemas']['Webhook'];
export type WebhookWithSecret =
  paths['/v1/webhooks']['post']['responses'][201]['content']['application/json'];
export type DeliveryAttempt = components['schemas']['DeliveryAttempt'];
export type WebhookEvent =
  paths['/v1/webhooks']['post']['requestBody']['content']['application/json']['events'][number];

/**
 * What a webhook can subscribe to, in the order the form lists them: every event of the API's
 * enum (DESIGN §5 "Webhooks may subscribe to all of them"); `Unlisted` below fails the type
 * check when the document gains one this list lacks.
 */
export const WEBHOOK_EVENTS = [
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
  'broadcast.updated',
  'template.updated',
] as const satisfies readonly WebhookEvent[];

type Unlisted = Exclude<WebhookEvent, (typeof WEBHOOK_EVENTS)[number]>;
const everyEventListed: [Unlisted] extends [never] ? true : Unlisted = true;
void everyEventListed;

export const listWebhooks = (signal?: AbortSignal) => data(api.GET('/v1/webhooks', { signal }));

export const getWebhook = (id: string, signal?: AbortSignal) =>
  data(api.GET('/v1/webhooks/{id}', { params: { path: { id } }, signal }));

/** The API's largest page: the log reads the newest 100 attempts, then 100 more at a time. */
export const DELIVERY_PAGE = 100;

export type DeliveryPage = Awaited<ReturnType<typeof listDeliveries>>;

const listDeliveries = (id: string, page: number, signal?: AbortSignal) =>
  data(
    api.GET('/v1/webhooks/{id}/deliveries', {
      params: { path: { id }, query: { page, limit: DELIVERY_PAGE } },
      signal,
    }),
  );

/**
 * A webhook's delivery log, newest first, a page of the API at a time ("Older attempts" loads
 * the next). The API pages by number, so an attempt made since the first page was read pushes
 * one down into the next page: the screen shows each attempt once, by id.
 */
export function useDeliveries(id: string, refetchInterval: number) {
  return useInfiniteQuery<DeliveryPage, number>({
    queryKey: keys.deliveries(id),
    initialPageParam: 1,
    getNextPageParam: (last) =>
      last.page * DELIVERY_PAGE < last.total ? last.page + 1 : undefined,
    queryFn: ({ pageParam, signal }) => listDeliveries(id, pageParam, signal),
    refetchInterval,
  });
}

export async function createWebhook(url: string, events: WebhookEvent[]) {
  const created = await data(api.POST('/v1/webhooks', { body: { url, events } }));
  await queryClient.invalidateQueries({ queryKey: keys.webhooks() });
  return created;
}

export type WebhookChange =
  paths['/v1/webhooks/{id}']['patch']['requestBody']['content']['application/json'];

/** PATCH /v1/webhooks/{id}: its events, or enabled / disabled. */
export async function updateWebhook(id: string, change: WebhookChange) {
  const updated = await data(
    api.PATCH('/v1/webhooks/{id}', { params: { path: { id } }, body: change }),
  );
  queryClient.setQueryData(keys.webhook(id), updated);
  await queryClient.invalidateQueries({ queryKey: keys.webhooks() });
  return updated;
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
