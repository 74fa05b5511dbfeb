import type { ConnectionProvider } from '../db/schema.js';
import type { GraphClient } from './meta/graph-client.js';
import type { WhatsAppTemplateApi } from './provider-templates.js';
import { WhatsAppTemplates } from './whatsapp/templates.js';

/**
 * The template API of a connection whose provider keeps templates of its own (WhatsApp Cloud:
 * the business account's message templates), or null when templates are ours alone.
 * `secrets` opens the connection's sealed credentials, only when they are needed.
 */
export function templateApiOf(
  graph: GraphClient,
  connection: {
    provider: ConnectionProvider;
    settings: Record<string, unknown>;
    secrets: () => Record<string, string>;
  },
): WhatsAppTemplateApi | null {
  if (connection.provider !== 'whatsapp_cloud') return null;
  return new WhatsAppTemplates({
    graph,
    businessAccountId: String(connection.settings.business_account_id),
    accessToken: connection.secrets().access_token!,
  });
}
