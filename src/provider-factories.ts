// How each kind of connection becomes its channel's provider: part of the service's wiring
// (services.ts), kept apart so that the adapters' options read in one place.

import type { FastifyBaseLogger } from 'fastify';
import type { ChannelProvider } from './channels/channel.js';
import { PageMessagingProvider } from './channels/meta-pages/page-messaging.provider.js';
import type { GraphClient } from './channels/meta/graph-client.js';
import { WhatsAppCloudProvider } from './channels/whatsapp/whatsapp-cloud.provider.js';
import type { Clock } from './clock.js';
import type { ConnectionRow } from './connections/connections.repository.js';
import type { ProviderFactory } from './connections/provider-resolver.js';
import type { ProviderIdAliasesRepository } from './inbound/provider-id-aliases.repository.js';

export function providerFactories(deps: {
  graph: GraphClient;
  webchat: ChannelProvider;
  /** Where a caption's own message id is kept as another name of its message. */
  captionAliases: Pick<ProviderIdAliasesRepository, 'add'>;
  /** Records Graph's refusal of a connection's token; must not throw. */
  tokenRefused: (row: ConnectionRow, reason: string) => Promise<void>;
  clock: Clock;
  log: FastifyBaseLogger;
}): Record<'messenger' | 'instagram' | 'whatsapp_cloud' | 'webchat', ProviderFactory> {
  const { graph, log } = deps;
  // Messenger and Instagram both send through the Page's Send API with the page token.
  const pageProvider =
    (channel: 'messenger' | 'instagram'): ProviderFactory =>
    ({ row, secrets }) =>
      new PageMessagingProvider({
        graph,
        channel,
        pageId: String(row.settings.page_id),
        pageAccessToken: secrets.page_access_token!,
        tokenRefused: (reason) => deps.tokenRefused(row, reason),
        // A caption's own message id names the message too (reads and deliveries may name it).
        captionSent: (attachmentId, captionId) =>
          deps.captionAliases
            .add(row.account_id, captionId, attachmentId, deps.clock.now())
            .catch((err: unknown) =>
              log.error(
                { err, connection: row.id, message: attachmentId },
                'recording a caption’s message id failed; reports naming it will be dropped',
              ),
            ),
        captionFailed: (attachmentId, reason) =>
          log.warn(
            { connection: row.id, message: attachmentId, reason },
            'caption not sent; the attachment was, so the message stays sent without it',
          ),
      });
  return {
    messenger: pageProvider('messenger'),
    instagram: pageProvider('instagram'),
    whatsapp_cloud: ({ row, secrets }) =>
      new WhatsAppCloudProvider({
        graph,
        phoneNumberId: String(row.settings.phone_number_id),
        accessToken: secrets.access_token!,
        tokenRefused: (reason) => deps.tokenRefused(row, reason),
      }),
    webchat: () => deps.webchat,
  };
}
