import type { Clock } from '../clock.js';
import { Batcher } from '../db/batcher.js';
import type { ReadCache } from '../db/read-cache.js';
import type { Tx } from '../db/database.js';
import type { Channel, CustomFieldValue, IdentityChannel } from '../db/schema.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { Conflict, NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type {
  ContactChanges,
  ContactFilter,
  ContactRecord,
  ContactRow,
  ContactsRepository,
  MessagingAddress,
  StoredIdentity,
} from './contacts.repository.js';
import type { Contact, CreateContactBody, Tag, UpdateContactBody } from './contacts.schema.js';
import { isIdentityChannel, presentIdentities } from './identities.js';
import { isValidE164 } from './phone.js';

const FIELD_KEY = /^[a-z0-9_]{1,64}$/;
/** Tags a contact may carry (DESIGN §2). */
const MAX_TAGS = 50;
/** How often a lookup retries when the contact it found was merged away or deleted meanwhile. */
const LOOKUP_ATTEMPTS = 5;

/** The contact as the API shows it; `identities` are the stored ones (the row's, if it has them). */
export function toContact(
  row: ContactRow | ContactRecord,
  identities: readonly StoredIdentity[] = 'identities' in row ? row.identities : [],
): Contact {
  return {
    id: row.id,
    phone: row.phone,
    name: row.name,
    email: row.email,
    tags: row.tags,
    lifecycle_stage: row.lifecycle_stage,
    custom_fields: row.custom_fields,
    identities: presentIdentities(row.phone, identities),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** A channel's id for a person, as a provider gives it: non-empty text of at most 256 characters. */
function checkExternalId(externalId: string): string {
  if (externalId.length < 1 || externalId.length > 256 || externalId.includes('\u0000')) {
    throw new ValidationError('identity', 'must be 1 to 256 characters');
  }
  return externalId;
}

export function checkPhone(phone: string): string {
  if (!isValidE164(phone)) {
    throw new ValidationError('phone', 'must be a valid E.164 number such as +14155550123');
  }
  return phone;
}

/** Trimmed, 1–64 characters, de-duplicated in first-seen order; `field` names them in errors. */
export function normaliseTags(tags: string[], field = 'tags'): string[] {
  const out: string[] = [];
  for (const [i, raw] of tags.entries()) {
    const tag = raw.trim();
    if (tag.length < 1 || tag.length > 64) {
      throw new ValidationError(`${field}.${i}`, 'must be 1 to 64 characters after trimming');
    }
    if (!out.includes(tag)) out.push(tag);
  }
  return out;
}

function checkFieldKeys(fields: Record<string, unknown>): void {
  for (const key of Object.keys(fields)) {
    if (!FIELD_KEY.test(key)) {
      throw new ValidationError(
        `custom_fields.${key}`,
        'key must be 1 to 64 characters of a-z, 0-9 and _',
      );
    }
  }
}

export class ContactsService {
  /** Reads by id of concurrent requests share one query. */
  private readonly byId: Batcher<{ accountId: string; id: string }, ContactRecord | undefined>;

  constructor(
    private readonly deps: {
      tx: Transactor;
      contacts: ContactsRepository;
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
  }

  /** Runs a change to one contact; once it has committed (or failed), this process's cached copy goes. */
  private async changing<T>(
    accountId: string,
    ids: string | string[],
    work: () => Promise<T>,
  ): Promise<T> {
    try {
      return await work();
    } finally {
      for (const id of typeof ids === 'string' ? [ids] : ids)
        this.deps.cache.invalidate(`${accountId} ${id}`);
    }
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
    return this.deps.tx.run(scope, async (trx) => {
      try {
        await this.deps.contacts.insert(trx, row);
      } catch (err) {
        if (isUniqueViolation(err, 'contacts_phone'))
          throw new Conflict(`a contact with phone ${phone} already exists`);
        throw err;
      }
      await this.deps.contacts.addTags(trx, scope.accountId, tags, now);
      const contact = toContact(row);
      await this.deps.outbox.record(trx, scope.accountId, 'contact.created', contact);
      return contact;
    });
  }

  async get(scope: Scope, id: string): Promise<Contact> {
    const contact = await this.deps.cache.get(`${scope.accountId} ${id}`, async () => {
      const row = await this.byId.submit({ accountId: scope.accountId, id });
      return row && toContact(row);
    });
    if (!contact) throw new NotFound('contact', id);
    return contact;
  }

  /**
   * The contact with this phone, or a new one named `name` (a provider's profile name) with its
   * `contact.created` event; held until the transaction ends, so that it cannot be merged away
   * under what the caller records for it.
   */
  async findOrCreateByPhone(
    trx: Tx,
    accountId: string,
    phone: string,
    name: string | null = null,
  ): Promise<Contact> {
    checkPhone(phone);
    for (let attempt = 0; attempt < LOOKUP_ATTEMPTS; attempt++) {
      const row = this.newRow(accountId, phone, name);
      if (await this.deps.contacts.insertIfPhoneFree(trx, row)) {
        const contact = toContact(row);
        await this.deps.outbox.record(trx, accountId, 'contact.created', contact);
        return contact;
      }
      const found = await this.deps.contacts.lockByPhone(trx, accountId, phone);
      if (found) return toContact(found);
      // The contact that had the phone was merged into another or deleted while we waited.
    }
    throw new Error(`the contact with phone ${phone} kept changing while it was looked up`);
  }

  /**
   * findOrCreateByPhone for several senders at once (one account, valid E.164 phones, the first
   * name given for a phone wins): the contacts keyed by phone, each new one with its
   * `contact.created` event, every one held until the transaction ends. A few statements
   * however many phones.
   */
  async findOrCreateManyByPhone(
    trx: Tx,
    accountId: string,
    senders: { phone: string; name: string | null }[],
  ): Promise<Map<string, Contact>> {
    const names = new Map<string, string | null>();
    for (const s of senders) if (!names.has(checkPhone(s.phone))) names.set(s.phone, s.name);
    const found = new Map<string, Contact>();
    for (let attempt = 0; attempt < LOOKUP_ATTEMPTS && found.size < names.size; attempt++) {
      const missing = [...names].filter(([phone]) => !found.has(phone));
      const rows = missing.map(([phone, name]) => this.newRow(accountId, phone, name));
      const inserted = await this.deps.contacts.insertManyIfPhoneFree(trx, rows);
      const created = rows.filter((row) => inserted.has(row.id)).map((row) => toContact(row));
      for (const contact of created) found.set(contact.phone!, contact);
      await this.deps.outbox.recordMany(
        trx,
        accountId,
        created.map((data) => ({ type: 'contact.created' as const, data })),
      );
      const taken = missing.map(([phone]) => phone).filter((phone) => !found.has(phone));
      for (const row of await this.deps.contacts.lockManyByPhone(trx, accountId, taken))
        if (row.phone !== null && names.has(row.phone)) found.set(row.phone, toContact(row));
      // A phone still missing had a contact that was merged into another or deleted meanwhile.
    }
    if (found.size < names.size)
      throw new Error('contacts kept changing while their phones were looked up');
    return found;
  }

  /**
   * The contact known on `channel` by `externalId` (a PSID, an IGSID, a webchat identifier), or
   * a new phone-less one with that identity, named `name`, with its `contact.created` event.
   * Race-safe: concurrent first messages from one sender make one contact and one event. The
   * contact is held until the transaction ends, as findOrCreateByPhone holds it, and an
   * identity moved by a merge meanwhile finds the contact it was merged into. On whatsapp the
   * identity is the phone's digits (with or without its `+`).
   */
  async findOrCreateByIdentity(
    trx: Tx,
    accountId: string,
    channel: Channel,
    externalId: string,
    name: string | null = null,
  ): Promise<Contact> {
    if (!isIdentityChannel(channel)) {
      return this.findOrCreateByPhone(trx, accountId, `+${externalId.replace(/^\+/, '')}`, name);
    }
    checkExternalId(externalId);
    for (let attempt = 0; attempt < LOOKUP_ATTEMPTS; attempt++) {
      const found = await this.deps.contacts.lockByIdentity(trx, accountId, channel, externalId);
      if (found) return toContact(found);
      const row = this.newRow(accountId, null, name);
      if (await this.deps.contacts.insertWithIdentity(trx, row, channel, externalId)) {
        const contact = toContact(row, [{ channel, id: externalId }]);
        await this.deps.outbox.record(trx, accountId, 'contact.created', contact);
        return contact;
      }
      // Created meanwhile by a concurrent first message: found on the next look.
    }
    throw new Error(
      `the contact with ${channel} identity ${externalId} kept changing while it was looked up`,
    );
  }

  /**
   * The contact known on `channel` by `from` becomes the one known by `to`, conversations and
   * all (an anonymous webchat visitor who identifies for the first time). Answers that contact,
   * or null when no contact holds `from` or one holds `to` already: then nothing changed.
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
        if (await this.deps.contacts.lockByIdentity(trx, scope.accountId, channel, to)) return;
        contactId = await this.deps.contacts.renameIdentity(
          trx,
          scope.accountId,
          channel,
          from,
          to,
        );
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
    const row = await this.deps.contacts.findByIdentity(scope.accountId, channel, externalId);
    return row && toContact(row);
  }

  /** The contact by id, held as findOrCreateByPhone holds it; 404 when there is none. */
  async lockInTransaction(trx: Tx, accountId: string, id: string): Promise<Contact> {
    const row = await this.deps.contacts.lockById(trx, accountId, id);
    if (!row) throw new NotFound('contact', id);
    return toContact(row);
  }

  /**
   * Where each of these contacts is reached on `channel` (phone, stored identity), read and held
   * until the transaction ends, so that none is merged away or deleted under the messages being
   * recorded for it; a contact already gone is absent.
   */
  async lockForMessaging(
    trx: Tx,
    accountId: string,
    ids: readonly string[],
    channel: Channel,
  ): Promise<Map<string, MessagingAddress>> {
    return this.deps.contacts.lockForMessaging(trx, accountId, [...ids].sort(), channel);
  }

  /**
   * Names a contact that has no name yet (a provider's profile name, learnt after the contact
   * was created); a contact already named, or gone, is left as it is. True when named.
   */
  async nameIfUnnamed(scope: Scope, id: string, name: string): Promise<boolean> {
    const trimmed = name.trim().slice(0, 200);
    if (trimmed === '') return false;
    return this.changing(scope.accountId, [id], () =>
      this.deps.tx.run(scope, async (trx) => {
        const named = await this.deps.contacts.nameIfUnnamed(
          trx,
          scope.accountId,
          id,
          trimmed,
          this.deps.clock.now(),
        );
        return named;
      }),
    );
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
        const contact = await this.deps.contacts.lockByIdentity(
          trx,
          scope.accountId,
          channel,
          externalId,
        );
        if (!contact) return 'unknown';
        if (trimmed === '') return 'unchanged';
        held.id = contact.id;
        const changed = await this.deps.contacts.nameIfUnnamed(
          trx,
          scope.accountId,
          contact.id,
          trimmed,
          this.deps.clock.now(),
        );
        return changed ? 'named' : 'unchanged';
      });
    } finally {
      if (held.id !== undefined) this.deps.cache.invalidate(`${scope.accountId} ${held.id}`);
    }
  }

  private newRow(accountId: string, phone: string | null, name: string | null): ContactRow {
    const now = this.deps.clock.now();
    return {
      account_id: accountId,
      id: newId('con'),
      phone,
      name: name === null ? null : name.slice(0, 200),
      email: null,
      tags: [],
      lifecycle_stage: null,
      custom_fields: {},
      created_at: now,
      updated_at: now,
    };
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
    return this.changing(scope.accountId, id, () =>
      this.deps.tx.run(scope, async (trx) => {
        let row: ContactRow | undefined;
        try {
          row = await this.deps.contacts.update(trx, scope.accountId, id, changes);
        } catch (err) {
          if (isUniqueViolation(err, 'contacts_phone')) {
            throw new Conflict(`another contact already has phone ${changes.phone}`);
          }
          throw err;
        }
        if (!row) throw new NotFound('contact', id);
        if (changes.tags) await this.deps.contacts.addTags(trx, scope.accountId, changes.tags, now);
        return toContact(row);
      }),
    );
  }

  async setLifecycle(scope: Scope, id: string, stage: string | null): Promise<Contact> {
    return this.changing(scope.accountId, id, () =>
      this.deps.tx.run(scope, async (trx) => {
        const row = await this.deps.contacts.update(trx, scope.accountId, id, {
          lifecycle_stage: stage,
          updated_at: this.deps.clock.now(),
        });
        if (!row) throw new NotFound('contact', id);
        return toContact(row);
      }),
    );
  }

  /**
   * Folds `otherId` into contact `id` (one person met on two channels), in one transaction with
   * both contacts locked in id order: the other's identities, conversations (with their
   * messages and notes) and tags move over, its custom fields fill keys this contact lacks, a
   * missing phone, name or email is taken from it, and it is deleted. Refused with 409 when both
   * have an identity on one channel (two phones, two PSIDs). When both merely have a conversation
   * on one channel (possible without identities through the sandbox), the other's is folded into
   * this one's: a contact has one conversation per channel. Emits no event: the API has no event
   * for a contact changed or deleted.
   */
  async merge(scope: Scope, id: string, otherId: string): Promise<Contact> {
    if (otherId === id)
      throw new ValidationError('contact_id', 'must be another contact than the one merged into');
    return this.changing(scope.accountId, [id, otherId], () =>
      this.deps.tx.run(scope, async (trx) => {
        const locked = await this.deps.contacts.lockForMerge(trx, scope.accountId, [id, otherId]);
        const into = locked.get(id);
        if (!into) throw new NotFound('contact', id);
        const other = locked.get(otherId);
        if (!other) throw new NotFound('contact', otherId);
        return this.mergeLocked(trx, scope.accountId, into, other);
      }),
    );
  }

  /**
   * An anonymous webchat visitor who wrote, then identified as a contact known already (`intoId`):
   * the contact holding the visitor's anonymous identity is merged into the known one (see
   * `merge`), the anonymous identity dropped, and the anonymous webchat conversation's messages
   * and notes moved into the known contact's webchat conversation (a contact has one per
   * channel). One transaction. Answers false, with nothing changed, when the two cannot be
   * merged (both have a phone, or an identity or a conversation on another channel) or the
   * anonymous identity is gone.
   */
  async foldAnonymous(
    scope: Scope,
    channel: IdentityChannel,
    anonymousId: string,
    intoId: string,
  ): Promise<boolean> {
    const holder = await this.deps.contacts.findByIdentity(scope.accountId, channel, anonymousId);
    if (!holder || holder.id === intoId) return false;
    const { accountId } = scope;
    try {
      await this.changing(accountId, [intoId, holder.id], () =>
        this.deps.tx.run(scope, async (trx) => {
          const locked = await this.deps.contacts.lockForMerge(trx, accountId, [intoId, holder.id]);
          const into = locked.get(intoId);
          const other = locked.get(holder.id);
          const anonymous = (i: StoredIdentity) => i.channel === channel && i.id === anonymousId;
          if (!into || !other || !other.identities.some(anonymous))
            throw new Conflict('the contacts changed while the visitor identified');
          await this.deps.contacts.deleteIdentity(trx, accountId, channel, anonymousId);
          const conversations = await this.deps.contacts.lockConversationChannels(trx, accountId, [
            intoId,
            holder.id,
          ]);
          const on = (contactId: string) =>
            conversations.find((c) => c.contact_id === contactId && c.channel === channel);
          const from = on(holder.id);
          const to = on(intoId);
          if (from && to)
            await this.deps.contacts.foldConversation(
              trx,
              accountId,
              from.id,
              to.id,
              this.deps.clock.now(),
            );
          await this.mergeLocked(trx, accountId, into, {
            ...other,
            identities: other.identities.filter((i) => !anonymous(i)),
          });
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof Conflict || err instanceof ValidationError) return false;
      throw err;
    }
  }

  /** `merge` with both contacts locked (see there). */
  private async mergeLocked(
    trx: Tx,
    accountId: string,
    into: ContactRecord,
    other: ContactRecord,
  ): Promise<Contact> {
    const [id, otherId] = [into.id, other.id];
    if (into.phone !== null && other.phone !== null) {
      throw new Conflict(
        `contacts ${id} and ${otherId} both have a phone (a whatsapp identity): a contact has one identity per channel, so they cannot be merged`,
      );
    }
    for (const identity of into.identities) {
      if (other.identities.some((o) => o.channel === identity.channel)) {
        throw new Conflict(
          `contacts ${id} and ${otherId} both have a ${identity.channel} identity: a contact has one identity per channel, so they cannot be merged`,
        );
      }
    }
    const tags = [...into.tags, ...other.tags.filter((t) => !into.tags.includes(t))];
    if (tags.length > MAX_TAGS) {
      throw new ValidationError(
        'contact_id',
        `the two contacts have ${tags.length} different tags together; a contact has at most ${MAX_TAGS}`,
      );
    }

    // Both contacts met on one channel without two identities there (a phone contact who wrote
    // through the sandbox before the channel was connected): one conversation per contact and
    // channel, so the other's is folded into this one (messages and notes move; open if either
    // was). Locked after both contacts, the order every merge and inbound message takes.
    const conversations = await this.deps.contacts.lockConversationChannels(trx, accountId, [
      id,
      otherId,
    ]);
    const now = this.deps.clock.now();
    for (const c of conversations) {
      if (c.contact_id !== otherId) continue;
      const twin = conversations.find((o) => o.contact_id === id && o.channel === c.channel);
      if (twin) await this.deps.contacts.foldConversation(trx, accountId, c.id, twin.id, now);
    }
    await this.deps.contacts.moveBelongings(trx, accountId, otherId, id);
    // Deleted before its phone is given to the merged contact, which the phone's unique key needs.
    await this.deps.contacts.delete(trx, accountId, otherId);
    const merged = await this.deps.contacts.replaceFields(trx, accountId, id, {
      phone: into.phone ?? other.phone,
      name: into.name ?? other.name,
      email: into.email ?? other.email,
      tags,
      custom_fields: { ...other.custom_fields, ...into.custom_fields },
      updated_at: now,
    });
    return toContact(merged);
  }

  /** Permanent: the contact is gone, its conversations and messages stay. */
  async delete(scope: Scope, id: string): Promise<{ success: true }> {
    return this.changing(scope.accountId, id, () =>
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
