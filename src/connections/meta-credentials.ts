import { AppError, Unavailable } from '../errors.js';
import {
  GraphError,
  TOKEN_CODES,
  classifyGraphError,
  type GraphClient,
} from '../channels/meta/graph-client.js';
import type {
  InstagramConnectBody,
  MessengerConnectBody,
  WhatsAppConnectBody,
} from './connections.schema.js';

export type MetaConnectBody = WhatsAppConnectBody | MessengerConnectBody | InstagramConnectBody;

/** What a Meta connection keeps: settings anyone with the API key may read, and the sealed rest. */
export interface CheckedMetaCredentials {
  settings: Record<string, unknown>;
  secrets: Record<string, string>;
}

/**
 * Checks Meta credentials with one Graph call before anything is stored: the phone number
 * (WhatsApp) or the Page (Messenger, Instagram), read with the token given. A refusal is a 422
 * quoting Graph; Graph unreachable, failing or throttling us is a 503 the client may retry.
 */
export async function checkMetaCredentials(
  graph: GraphClient,
  body: MetaConnectBody,
  signal?: AbortSignal,
): Promise<CheckedMetaCredentials> {
  switch (body.provider) {
    case 'whatsapp_cloud': {
      const phone = await ask<{ display_phone_number?: unknown; verified_name?: unknown }>(
        () =>
          graph.call('GET', body.phone_number_id, {
            token: body.access_token,
            query: { fields: 'display_phone_number,verified_name' },
            signal,
          }),
        { idField: 'phone_number_id', tokenField: 'access_token', token: body.access_token },
      );
      return {
        settings: {
          phone_number_id: body.phone_number_id,
          business_account_id: body.business_account_id,
          display_phone_number: text(phone.display_phone_number),
          verified_name: text(phone.verified_name),
        },
        secrets: { access_token: body.access_token, app_secret: body.app_secret },
      };
    }
    case 'messenger':
    case 'instagram': {
      const instagram = body.provider === 'instagram' ? body : null;
      const page = await ask<{
        name?: unknown;
        instagram_business_account?: { id?: unknown };
      }>(
        () =>
          graph.call('GET', body.page_id, {
            token: body.page_access_token,
            query: { fields: instagram ? 'name,instagram_business_account' : 'name' },
            signal,
          }),
        { idField: 'page_id', tokenField: 'page_access_token', token: body.page_access_token },
      );
      // Graph names the Instagram account linked to the Page only when the token may see it; a
      // different one means the inbound webhooks would never match this connection.
      const linked = text(page.instagram_business_account?.id);
      if (instagram && linked !== null && linked !== instagram.instagram_account_id) {
        throw new AppError(
          'validation_error',
          `page ${body.page_id} is linked to Instagram account ${linked}, not ${instagram.instagram_account_id}`,
          422,
          [{ field: 'instagram_account_id', issue: `the page's Instagram account is ${linked}` }],
        );
      }
      return {
        settings: {
          page_id: body.page_id,
          ...(instagram ? { instagram_account_id: instagram.instagram_account_id } : {}),
          page_name: text(page.name),
        },
        secrets: { page_access_token: body.page_access_token, app_secret: body.app_secret },
      };
    }
  }
}

async function ask<T>(
  call: () => Promise<unknown>,
  fields: { idField: string; tokenField: string; token: string },
): Promise<T> {
  try {
    const answer = await call();
    return (answer && typeof answer === 'object' ? answer : {}) as T;
  } catch (err) {
    if (!(err instanceof GraphError)) throw err;
    // Quoted back to the client: never with the token in it, whatever answered.
    const said = err.describe().split(fields.token).join('[token]');
    if (classifyGraphError(err) !== 'final') {
      throw new Unavailable(
        `Graph could not check the credentials now (${said}); try again`,
        err.retryAfterMs === null ? 5 : Math.max(1, Math.ceil(err.retryAfterMs / 1000)),
      );
    }
    const field =
      err.code !== null && TOKEN_CODES.has(err.code) ? fields.tokenField : fields.idField;
    throw new AppError('validation_error', `Graph refused the credentials: ${said}`, 422, [
      { field, issue: said },
    ]);
  }
}

function text(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}
