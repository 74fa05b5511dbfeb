// Channel connections as the settings screen reads and changes them (GET/PUT/DELETE /v1/channels).
import { api, data } from '../../../api/client.js';
import { keys } from '../../../api/keys.js';
import type { components, paths } from '../../../api/openapi.js';
import { queryClient } from '../../../lib/query.js';

export type Connection = components['schemas']['Connection'];
export type ChannelName = Connection['channel'];
export type ConnectBody =
  paths['/v1/channels/{channel}']['put']['requestBody']['content']['application/json'];

export const listChannels = (signal?: AbortSignal) => data(api.GET('/v1/channels', { signal }));

export async function connect(channel: ChannelName, body: ConnectBody): Promise<Connection> {
  const connection = await data(
    api.PUT('/v1/channels/{channel}', { params: { path: { channel } }, body }),
  );
  await queryClient.invalidateQueries({ queryKey: keys.channels() });
  return connection;
}

export async function disconnect(channel: ChannelName): Promise<void> {
  await data(api.DELETE('/v1/channels/{channel}', { params: { path: { channel } } }));
  await queryClient.invalidateQueries({ queryKey: keys.channels() });
}

export const CHANNEL_LABELS: Record<ChannelName, string> = {
  whatsapp: 'WhatsApp',
  instagram: 'Instagram',
  messenger: 'Messenger',
  webchat: 'Website chat',
};

/** The connection's state as the API names it, in words. */
export function stateLabel(c: Connection): string {
  if (c.status === 'error') return 'Error';
  if (c.status === 'not_connected') return 'Not connected';
  return c.provider === 'sandbox' ? 'Sandbox' : 'Connected';
}
