import type { Db } from '../db/database.js';

/**
 * Other provider ids of our messages: on Messenger and Instagram a captioned image or document is
 * two Send API messages, and the caption's id names the same message of ours as the attachment's.
 */
export class ProviderIdAliasesRepository {
  constructor(private readonly db: Db) {}

  /** `alias` names the message whose provider id is `providerMessageId`; once. */
  async add(accountId: string, alias: string, providerMessageId: string, now: Date): Promise<void> {
    await this.db
      .insertInto('provider_id_aliases')
      .values({
        account_id: accountId,
        alias,
        provider_message_id: providerMessageId,
        created_at: now,
      })
      .onConflict((oc) => oc.columns(['account_id', 'alias']).doNothing())
      .execute();
  }

  /** The provider id each of these aliases stands for; ids that are no alias are absent. */
  async resolve(accountId: string, ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('provider_id_aliases')
      .select(['alias', 'provider_message_id'])
      .where('account_id', '=', accountId)
      .where('alias', 'in', [...new Set(ids)])
      .execute();
    return new Map(rows.map((r) => [r.alias, r.provider_message_id]));
  }
}
