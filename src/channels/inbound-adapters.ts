import type { ConnectionProvider } from '../db/schema.js';
import type { InboundAdapter } from './channel.js';
import type { GraphClient } from './meta/graph-client.js';
import { PageMessagingInbound } from './meta-pages/page-messaging.inbound.js';
import { WhatsAppCloudInbound } from './whatsapp/whatsapp-cloud.inbound.js';

/** The inbound adapter of each connection provider whose webhooks arrive over HTTP. */
export type InboundAdapters = Partial<Record<ConnectionProvider, InboundAdapter>>;

/**
 * Meta's providers, through one Graph client. Webchat has none: its visitors post to endpoints
 * of their own (the webchat feature), not to a provider webhook.
 */
export function inboundAdapters(graph: GraphClient): InboundAdapters {
  return {
    whatsapp_cloud: new WhatsAppCloudInbound(graph),
    messenger: new PageMessagingInbound(graph, 'messenger'),
    instagram: new PageMessagingInbound(graph, 'instagram'),
  };
}
