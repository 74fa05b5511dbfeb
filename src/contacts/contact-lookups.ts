import type { Clock } from '../clock.js';
import type { Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import { NotFound } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import { newId } from '../ids.js';
import { checkExternalId, checkPhone, toContact } from './contact.js';
import type { ContactRow } from './contact-columns.js';
import type { ContactsRepository, MessagingAddress } from './contacts.repository.js';
import type { Contact } from './contacts.schema.js';
import type { ContactIdentitiesRepository } from './identities.repository.js';
import { isIdentityChannel } from './identities.js';

/** How often a lookup retries when the contact it found was merged away or deleted meanwhile. */
const LOOKUP_ATTEMPTS = 5;

/**
 * The contacts a message is recorded for, found (or created) and held inside the caller's
 * transaction, so that none is merged away or deleted under what the caller records for it.
 */
export class ContactLookups {
  constructor(
    private readonly deps: {
      contacts: ContactsRepository;
      identities: ContactIdentitiesRepository;
      outbox: Outbox;
      clock: Clock;
    },
  ) {}

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
      const found = await this.deps.identities.lockByIdentity(trx, accountId, channel, externalId);
      if (found) return toContact(found);
      const row = this.newRow(accountId, null, name);
      if (await this.deps.identities.insertWithIdentity(trx, row, channel, externalId)) {
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
}
