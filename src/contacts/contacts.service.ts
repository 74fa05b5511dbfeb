import type { Clock } from '../clock.js';
import { Batcher, groupBy } from '../db/batcher.js';
import type { ReadCache } from '../db/read-cache.js';
import type { Tx } from '../db/database.js';
import type { Channel, CustomFieldValue, IdentityChannel } from '../db/schema.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { Conflict, NotFound } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import {
  changing,
  checkExternalId,
  checkFieldKeys,
  checkPhone,
  normaliseTags,
  toContact,
} from './contact.js';
import { ContactLookups } from './contact-lookups.js';
import type { ContactRecord, ContactRow } from './contact-columns.js';
import type {
  ContactChanges,
  ContactFilter,
  ContactsRepository,
  MessagingAddress,
} from './contacts.repository.js';
import type { Contact, CreateContactBody, Tag, UpdateContactBody } from './contacts.schema.js';
import { isIdentityChannel } from './identities.js';
import type { ContactIdentitiesRepository } from './identities.repository.js';
import { ContactMerge } from './merge.js';
import type { ContactMergeRepository } from './merge.repository.js';

export { checkPhone, normaliseTags, toContact } from './contact.js';

export class ContactsService {
  /** Reads by id of concurrent requests share one query. */
  private readonly byId: Batcher<{ accountId: string; id: string }, ContactRecord | undefined>;
  /** Creates of concurrent requests share one transaction (see createMany). */
  private readonly creating: Batcher<{ scope: Scope; row: ContactRow }, Contact>;
  private readonly lookups: ContactLookups;
  private readonly merging: ContactMerge;

  constructor(
    private readonly deps: {
      tx: Transactor;
      contacts: ContactsRepository;
      identities: ContactIdentitiesRepository;
      merges: ContactMergeRepository;
      outbox: Outbox;
      clock: Clock;
      /**
       * Contacts by `<account id> <contact id>`, kept as presented so that a hit costs no
       * formatting; see ReadCache for how it stays correct.
       */
      cache: ReadCache<Contact>;
    },
  ) {
    this.byId = new Batcher((keys) => deps.contacts.findMany(keys), {
      maxBatch: 100,
      maxConcurrent: 1,
    });
    this.creating = new Batcher((requests) => this.createMany(requests), {
      maxBatch: 100,
      maxConcurrent: 2,
    });
    this.lookups = new ContactLookups(deps);
    this.merging = new ContactMerge(deps);
  }

  async create(scope: Scope, input: CreateContactBody): Promise<Contact> {
    const phone = checkPhone(input.phone);
    const tags = normaliseTags(input.tags ?? []);
    const customFields = input.custom_fields ?? {};
    checkFieldKeys(customFields);
    const now = this.deps.clock.now();
    const row: ContactRow = {
      account_id: scope.accountId,
      id: newId('con'),
      phone,
      name: input.name ?? null,
      email: input.email ?? null,
      tags,
      lifecycle_stage: null,
      custom_fields: customFields,
      created_at: now,
      updated_at: now,
    };
    return this.creating.submit({ scope, row });
  }

  /**
   * Creates contacts of concurrent requests in one transaction (group commit): the rows in one
   * statement, in phone order (two groups never wait on each other's phones), their tags, and
   * each account's `contact.created` events in one statement, with every request's idempotency
   * record. A taken phone fails the group, which the Batcher then runs one request at a time,
   * so that only that request gets its 409.
   */
  private async createMany(requests: { scope: Scope; row: ContactRow }[]): Promise<Contact[]> {
    const contacts = requests.map((r) => toContact(r.row));
    await this.deps.tx.db.transaction().execute(async (trx) => {
      const key = (r: ContactRow) => `${r.account_id} ${r.phone ?? ''}`;
      const rows = requests
        .map((r) => r.row)
        .sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      try {
        await this.deps.contacts.insertMany(trx, rows);
      } catch (err) {
        if (isUniqueViolation(err, 'contacts_phone') && requests.length === 1)
          throw new Conflict(`a contact with phone ${requests[0]!.row.phone} already exists`);
        throw err;
      }
      const created = requests.map((r, i) => ({
        row: r.row,
        contact: contacts[i]!,
        actor: r.scope.actor,
      }));
      for (const [accountId, group] of groupBy(created, (c) => c.row.account_id)) {
        const tags = [...new Set(group.flatMap((c) => c.row.tags))].sort();
        await this.deps.contacts.addTags(trx, accountId, tags, group[0]!.row.created_at);
        await this.deps.outbox.recordMany(
          trx,
          accountId,
          group.map((c) => ({ type: 'contact.created' as const, data: c.contact, actor: c.actor })),
        );
      }
      for (const [i, r] of requests.entries())
        if (r.scope.beforeCommit) await r.scope.beforeCommit(trx, contacts[i]);
    });
    for (const r of requests) r.scope.afterCommit?.();
    return contacts;
  }

  async get(scope: Scope, id: string): Promise<Contact> {
    const contact = await this.find(scope, id);
    if (!contact) throw new NotFound('contact', id);
    return contact;
  }

  /** These contacts of the account, each read as `get` reads it; a deleted one is absent. */
  async findMany(scope: Scope, ids: readonly string[]): Promise<Map<string, Contact>> {
    const found = new Map<string, Contact>();
    await Promise.all(
      [...new Set(ids)].map(async (id) => {
        const contact = await this.find(scope, id);
        if (contact) found.set(id, contact);
      }),
    );
    return found;
  }

  /** From the cache, else read with the lookups of concurrent requests (one query). */
  private find(scope: Scope, id: string): Promise<Contact | undefined> {
    return this.deps.cache.get(`${scope.accountId} ${id}`, async () => {
      const row = await this.byId.submit({ accountId: scope.accountId, id });
      return row && toContact(row);
    });
  }

  // Found or created, and held, inside the caller's transaction: see ContactLookups.

  findOrCreateByPhone(
    trx: Tx,
    accountId: string,
    phone: string,
    name: string | null = null,
  ): Promise<Contact> {
    return this.lookups.findOrCreateByPhone(trx, accountId, phone, name);
  }

  findOrCreateManyByPhone(
    trx: Tx,
    accountId: string,
    senders: { phone: string; name: string | null }[],
  ): Promise<Map<string, Contact>> {
    return this.lookups.findOrCreateManyByPhone(trx, accountId, senders);
  }

  findOrCreateByIdentity(
    trx: Tx,
    accountId: string,
    channel: Channel,
    externalId: string,
    name: string | null = null,
  ): Promise<Contact> {
    return this.lookups.findOrCreateByIdentity(trx, accountId, channel, externalId, name);
  }

  lockInTransaction(trx: Tx, accountId: string, id: string): Promise<Contact> {
    return this.lookups.lockInTransaction(trx, accountId, id);
  }

  lockForMessaging(
    trx: Tx,
    accountId: string,
    ids: readonly string[],
    channel: Channel,
  ): Promise<Map<string, MessagingAddress>> {
    return this.lookups.lockForMessaging(trx, accountId, ids, channel);
  }

  /**
   * The contact known on `channel` by `from` becomes the one known by `to`, conversations and
   * all (an anonymous webchat visitor who identifies for the first time), with its
   * `contact.updated`. Answers that contact, or null when no contact holds `from` or one holds
   * `to` already: then nothing changed.
   */
  async renameIdentity(
    scope: Scope,
    channel: IdentityChannel,
    from: string,
    to: string,
  ): Promise<Contact | null> {
    checkExternalId(to);
    let contactId: string | undefined;
    try {
      await this.deps.tx.run(scope, async (trx) => {
        if (await this.deps.identities.lockByIdentity(trx, scope.accountId, channel, to)) return;
        contactId = await this.deps.identities.renameIdentity(
          trx,
          scope.accountId,
          channel,
          from,
          to,
        );
        if (contactId === undefined) return;
        const row = await this.deps.contacts.lockById(trx, scope.accountId, contactId);
        if (row) await this.updated(trx, scope, toContact(row));
      });
    } catch (err) {
      // `to` was taken by a concurrent first message or identify: nothing changed.
      if (isUniqueViolation(err, 'contact_identities_pkey')) return null;
      throw err;
    }
    if (contactId === undefined) return null;
    this.deps.cache.invalidate(`${scope.accountId} ${contactId}`);
    return this.get(scope, contactId);
  }

  /**
   * The contact known on `channel` by `externalId`, or undefined when the sender is new (so that
   * an adapter can look up a new sender's profile name before its first message is recorded).
   */
  async findByIdentity(
    scope: Scope,
    channel: Channel,
    externalId: string,
  ): Promise<Contact | undefined> {
    if (!isIdentityChannel(channel) || externalId.length < 1 || externalId.length > 256)
      return undefined;
    const row = await this.deps.identities.findByIdentity(scope.accountId, channel, externalId);
    return row && toContact(row);
  }

  /**
   * Names a contact that has no name yet (a provider's profile name, learnt after the contact
   * was created), with its `contact.updated` (no actor: the service learnt it); a contact
   * already named, or gone, is left as it is. True when named.
   */
  async nameIfUnnamed(scope: Scope, id: string, name: string): Promise<boolean> {
    const trimmed = name.trim().slice(0, 200);
    if (trimmed === '') return false;
    return changing(this.deps.cache, scope.accountId, [id], () =>
      this.deps.tx.run(scope, (trx) => this.name(trx, scope.accountId, id, trimmed)),
    );
  }

  /** See `nameIfUnnamed`: in the caller's transaction. */
  private async name(trx: Tx, accountId: string, id: string, name: string): Promise<boolean> {
    const named = await this.deps.contacts.nameIfUnnamed(
      trx,
      accountId,
      id,
      name,
      this.deps.clock.now(),
    );
    if (named) await this.deps.outbox.record(trx, accountId, 'contact.updated', toContact(named));
    return named !== undefined;
  }

  /**
   * Names the contact known on `channel` by `externalId` if it has no name yet (see
   * `nameIfUnnamed`), the contact held meanwhile so that a merge cannot take the identity away
   * between the lookup and the change. `unknown` when no contact has the identity.
   */
  async nameIdentityIfUnnamed(
    scope: Scope,
    channel: Channel,
    externalId: string,
    name: string,
  ): Promise<'named' | 'unchanged' | 'unknown'> {
    const trimmed = name.trim().slice(0, 200);
    if (!isIdentityChannel(channel) || externalId.length < 1 || externalId.length > 256)
      return 'unknown';
    const held: { id?: string } = {};
    try {
      return await this.deps.tx.run(scope, async (trx) => {
        const contact = await this.deps.identities.lockByIdentity(
          trx,
          scope.accountId,
          channel,
          externalId,
        );
        if (!contact) return 'unknown';
        if (trimmed === '') return 'unchanged';
        held.id = contact.id;
        return (await this.name(trx, scope.accountId, contact.id, trimmed)) ? 'named' : 'unchanged';
      });
    } finally {
      if (held.id !== undefined) this.deps.cache.invalidate(`${scope.accountId} ${held.id}`);
    }
  }

  async list(scope: Scope, filter: ContactFilter, page: PageRequest): Promise<PageResult<Contact>> {
    // Tags are stored trimmed, so the filter is trimmed the same way.
    const tag = filter.tag?.trim();
    const { rows, total } = await this.deps.contacts.list(
      scope.accountId,
      { ...filter, tag },
      page,
    );
    return { data: rows.map((row) => toContact(row)), total, page: page.page };
  }

  async update(scope: Scope, id: string, input: UpdateContactBody): Promise<Contact> {
    const now = this.deps.clock.now();
    const changes: ContactChanges = { updated_at: now };
    if (input.phone !== undefined) changes.phone = checkPhone(input.phone);
    if (input.name !== undefined) changes.name = input.name;
    if (input.email !== undefined) changes.email = input.email;
    if (input.tags !== undefined) changes.tags = normaliseTags(input.tags);
    if (input.custom_fields !== undefined) {
      checkFieldKeys(input.custom_fields);
      const set: Record<string, CustomFieldValue> = {};
      const remove: string[] = [];
      for (const [key, value] of Object.entries(input.custom_fields)) {
        if (value === null) remove.push(key);
        else set[key] = value;
      }
      changes.setFields = set;
      changes.removeFields = remove;
    }
    return changing(this.deps.cache, scope.accountId, id, () =>
      this.deps.tx.run(scope, async (trx) => {
        let row: ContactRow | undefined;
        try {
          row = await this.deps.contacts.updateIfChanged(trx, scope.accountId, id, changes);
        } catch (err) {
          if (isUniqueViolation(err, 'contacts_phone')) {
            throw new Conflict(`another contact already has phone ${changes.phone}`);
          }
          throw err;
        }
        if (!row) return this.unchanged(trx, scope.accountId, id);
        if (changes.tags) await this.deps.contacts.addTags(trx, scope.accountId, changes.tags, now);
        return this.updated(trx, scope, toContact(row));
      }),
    );
  }

  async setLifecycle(scope: Scope, id: string, stage: string | null): Promise<Contact> {
    return changing(this.deps.cache, scope.accountId, id, () =>
      this.deps.tx.run(scope, async (trx) => {
        const row = await this.deps.contacts.updateIfChanged(trx, scope.accountId, id, {
          lifecycle_stage: stage,
          updated_at: this.deps.clock.now(),
        });
        if (!row) return this.unchanged(trx, scope.accountId, id);
        return this.updated(trx, scope, toContact(row));
      }),
    );
  }

  /** A contact a change left as it was: answered as it stands, with no event; gone, a 404. */
  private async unchanged(trx: Tx, accountId: string, id: string): Promise<Contact> {
    const row = await this.deps.contacts.lockById(trx, accountId, id);
    if (!row) throw new NotFound('contact', id);
    return toContact(row);
  }

  /** `contact.updated` for a contact changed, in the change's transaction (with its actor). */
  private async updated(trx: Tx, scope: Scope, contact: Contact): Promise<Contact> {
    await this.deps.outbox.record(trx, scope.accountId, 'contact.updated', contact, scope.actor);
    return contact;
  }

  /** Folds `otherId` into contact `id`: see ContactMerge.merge. */
  merge(scope: Scope, id: string, otherId: string): Promise<Contact> {
    return this.merging.merge(scope, id, otherId);
  }

  /** A visitor's anonymous contact folded into the one it identified as: see ContactMerge. */
  foldAnonymous(
    scope: Scope,
    channel: IdentityChannel,
    anonymousId: string,
    intoId: string,
  ): Promise<boolean> {
    return this.merging.foldAnonymous(scope, channel, anonymousId, intoId);
  }

  /** Permanent: the contact is gone, its conversations and messages stay. */
  async delete(scope: Scope, id: string): Promise<{ success: true }> {
    return changing(this.deps.cache, scope.accountId, id, () =>
      this.deps.tx.run(scope, async (trx) => {
        if (!(await this.deps.contacts.delete(trx, scope.accountId, id)))
          throw new NotFound('contact', id);
        return { success: true as const };
      }),
    );
  }

  async listTags(scope: Scope, page: PageRequest): Promise<PageResult<Tag>> {
    const { rows, total } = await this.deps.contacts.listTags(scope.accountId, page);
    return {
      data: rows.map((r) => ({ name: r.name, created_at: r.created_at.toISOString() })),
      total,
      page: page.page,
    };
  }
}
