import type { GraphClient } from '../meta/graph-client.js';
import { askGraph, textOf, type CheckedCredentials } from '../meta/credentials.js';

/** What connecting WhatsApp Cloud takes. */
export interface WhatsAppCredentials {
  phone_number_id: string;
  business_account_id: string;
  access_token: string;
  app_secret: string;
}

/**
 * Checks WhatsApp Cloud credentials with one Graph call before anything is stored: the phone
 * number, read with the token given (its display number and verified name are kept).
 */
export async function checkWhatsAppCredentials(
  graph: GraphClient,
  input: WhatsAppCredentials,
  signal?: AbortSignal,
): Promise<CheckedCredentials> {
  const phone = await askGraph<{ display_phone_number?: unknown; verified_name?: unknown }>(
    () =>
      graph.call('GET', input.phone_number_id, {
        token: input.access_token,
        query: { fields: 'display_phone_number,verified_name' },
        signal,
      }),
    { idField: 'phone_number_id', tokenField: 'access_token', token: input.access_token },
  );
  return {
    settings: {
      phone_number_id: input.phone_number_id,
      business_account_id: input.business_account_id,
      display_phone_number: textOf(phone.display_phone_number),
      verified_name: textOf(phone.verified_name),
    },
    secrets: { access_token: input.access_token, app_secret: input.app_secret },
  };
}
