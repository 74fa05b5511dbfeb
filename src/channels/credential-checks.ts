import type { CheckedCredentials } from './meta/credentials.js';
import type { GraphClient } from './meta/graph-client.js';
import { checkPageCredentials, type PageCredentials } from './meta-pages/credentials.js';
import { checkWhatsAppCredentials, type WhatsAppCredentials } from './whatsapp/credentials.js';

export type { CheckedCredentials } from './meta/credentials.js';

/** The credentials of a connection to one of Meta's providers, as the connect request gives them. */
export type ProviderCredentials =
  | ({ provider: 'whatsapp_cloud' } & WhatsAppCredentials)
  | ({ provider: 'messenger' | 'instagram' } & PageCredentials);

/**
 * Checks a connection's credentials with its provider (one call) before anything is stored, and
 * answers what the connection keeps. Webchat has none to check: it is ours.
 */
export function checkCredentials(
  graph: GraphClient,
  input: ProviderCredentials,
  signal?: AbortSignal,
): Promise<CheckedCredentials> {
  switch (input.provider) {
    case 'whatsapp_cloud':
      return checkWhatsAppCredentials(graph, input, signal);
    case 'messenger':
    case 'instagram':
      return checkPageCredentials(graph, input.provider, input, signal);
  }
}
