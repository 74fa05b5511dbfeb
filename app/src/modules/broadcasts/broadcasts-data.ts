// Broadcasts as the screens read them: the API's shapes, the calls, and the live updates.
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { components, paths } from '../../api/openapi.js';
import { queryClient } from '../../lib/query.js';

export type Broadcast = components['schemas']['Broadcast'];
export type Recipient = components['schemas']['BroadcastRecipient'];
export type BroadcastStatus = Broadcast['status'];
export type RecipientStatus = Recipient['status'];
export type Audience = Broadcast['audience'];
export type CreateBroadcast = NonNullable<
  paths['/v1/broadcasts']['post']['requestBody']
>['content']['application/json'];
export type LifecycleStage = NonNullable<Audience['lifecycle_stage']>;

export const LIFECYCLE_STAGES: LifecycleStage[] = ['lead', 'customer', 'churned'];
export const RECIPIENT_STATUSES: RecipientStatus[] = [
  'queued',
  'sent',
  'delivered',
  'read',
  'failed',
];
export const PAGE_SIZE = 20;

export interface Paged<T> {
  data: T[];
  total: number;
  page: number;
}

export function fetchBroadcasts(page: number, signal: AbortSignal): Promise<Paged<Broadcast>> {
  return data(api.GET('/v1/broadcasts', { params: { query: { page, limit: PAGE_SIZE } }, signal }));
}

export function fetchBroadcast(id: string, signal: AbortSignal): Promise<Broadcast> {
  return data(api.GET('/v1/broadcasts/{id}', { params: { path: { id } }, signal }));
}

export function fetchRecipients(
  id: string,
  status: RecipientStatus | '',
  page: number,
  signal: AbortSignal,
): Promise<Paged<Recipient>> {
  return data(
    api.GET('/v1/broadcasts/{id}/recipients', {
      params: {
        path: { id },
        query: { page, limit: PAGE_SIZE, ...(status ? { status } : {}) },
      },
      signal,
    }),
  );
}

export async function previewAudience(
  channel: Broadcast['channel'],
  audience: Audience,
  signal: AbortSignal,
): Promise<number> {
  return (await data(api.POST('/v1/broadcasts/preview', { body: { channel, audience }, signal })))
    .total;
}

export async function createBroadcast(body: CreateBroadcast): Promise<Broadcast> {
  const created = await data(api.POST('/v1/broadcasts', { body }));
  void queryClient.invalidateQueries({ queryKey: keys.broadcasts() });
  return created;
}

export async function cancelBroadcast(id: string): Promise<Broadcast> {
  const cancelled = await data(
    api.POST('/v1/broadcasts/{id}/cancel', { params: { path: { id } } }),
  );
  queryClient.setQueryData(keys.broadcast(id), cancelled);
  void queryClient.invalidateQueries({ queryKey: keys.broadcasts() });
  return cancelled;
}

/**
 * The server announces a broadcast's progress at most once a second, so what changed in the
 * second after an announcement (the last reports of a burst) comes with no event of its own: the
 * broadcast is read once more this long after its last event.
 */
const TRAILING_READ_MS = 1_500;
const trailing = new Map<string, ReturnType<typeof setTimeout>>();

function refresh(id: string): void {
  void queryClient.invalidateQueries({ queryKey: keys.broadcasts() });
  // The broadcast itself and its recipients (whose statuses moved) share its key's prefix.
  void queryClient.invalidateQueries({ queryKey: keys.broadcast(id) });
}

/**
 * `broadcast.updated` / `broadcast.completed` from the live stream: the broadcast on screen takes
 * the event's counts at once; the list and the recipients are read again, and once more after
 * the burst.
 */
export function broadcastEvent(broadcast: Broadcast): void {
  const { id } = broadcast;
  queryClient.setQueryData<Broadcast>(keys.broadcast(id), broadcast);
  void queryClient.invalidateQueries({ queryKey: keys.broadcasts() });
  void queryClient.invalidateQueries({ queryKey: [...keys.broadcast(id), 'recipients'] });
  clearTimeout(trailing.get(id));
  trailing.set(
    id,
    setTimeout(() => {
      trailing.delete(id);
      refresh(id);
    }, TRAILING_READ_MS),
  );
}

/** A status in words. */
export function statusLabel(status: BroadcastStatus | RecipientStatus): string {
  return status.charAt(0).toUpperCase() + status.slice(1);
}

/** The audience in words: "Tags vip, new · Stage customer", "Everyone". */
export function audienceLabel(audience: Audience): string {
  if (audience.all) return 'Everyone';
  const parts: string[] = [];
  if (audience.tags?.length) parts.push(`Tags ${audience.tags.join(', ')}`);
  if (audience.lifecycle_stage) parts.push(`Stage ${audience.lifecycle_stage}`);
  return parts.join(' · ');
}
