import { AppError } from '../../errors.js';
import type { GraphClient } from '../meta/graph-client.js';
import { askGraph, textOf, type CheckedCredentials } from '../meta/credentials.js';

/** What connecting a Page (Messenger) or its Instagram account takes. */
export interface PageCredentials {
  page_id: string;
  page_access_token: string;
  app_secret: string;
  /** Instagram only: the professional account linked to the Page. */
  instagram_account_id?: string;
}

/**
 * Checks Page credentials with one Graph call before anything is stored: the Page, read with the
 * token given (its name is kept); for Instagram, also the account linked to it.
 */
export async function checkPageCredentials(
  graph: GraphClient,
  kind: 'messenger' | 'instagram',
  input: PageCredentials,
  signal?: AbortSignal,
): Promise<CheckedCredentials> {
  const instagram = kind === 'instagram' ? (input.instagram_account_id ?? '') : null;
  const page = await askGraph<{ name?: unknown; instagram_business_account?: { id?: unknown } }>(
    () =>
      graph.call('GET', input.page_id, {
        token: input.page_access_token,
        query: { fields: instagram !== null ? 'name,instagram_business_account' : 'name' },
        signal,
      }),
    { idField: 'page_id', tokenField: 'page_access_token', token: input.page_access_token },
  );
  // Graph names the Instagram account linked to the Page only when the token may see it; a
  // different one means the inbound webhooks would never match this connection.
  const linked = textOf(page.instagram_business_account?.id);
  if (instagram !== null && linked !== null && linked !== instagram) {
    throw new AppError(
      'validation_error',
      `page ${input.page_id} is linked to Instagram account ${linked}, not ${instagram}`,
      422,
      [{ field: 'instagram_account_id', issue: `the page's Instagram account is ${linked}` }],
    );
  }
  return {
    settings: {
      page_id: input.page_id,
      ...(instagram !== null ? { instagram_account_id: instagram } : {}),
      page_name: textOf(page.name),
    },
    secrets: { page_access_token: input.page_access_token, app_secret: input.app_secret },
  };
}
