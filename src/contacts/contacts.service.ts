import type { Clock } from '../clock.js';
import { Batcher } from '../db/batcher.js';
import type { ReadCache } from '../db/read-cache.js';
import type { Tx } from '../db/database.js';
import type { CustomFieldValue } from '../db/schema.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { Conflict, NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type {
  ContactChanges,
  ContactFilter,
  ContactRow,
  ContactsRepository,
} from './contacts.repository.js';
import type { Contact, CreateContactBody, Tag, UpdateContactBody } from './contacts.schema.js';
import { isValidE164 } from './phone.js';

const FIELD_KEY = /^[a-z0-9_]{1,64}$/;

export function toContact(row: ContactRow): Contact {
  return {
    id: row.id,
    phone: row.phone,
    name: row.name,
    email: row.email,
    tags: row.tags,
    lifecycle_stage: row.lifecycle_stage,
    custom_fields: row.custom_fields,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function checkPhone(phone: string): string {
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
  private readonly byId: Batcher<{ accountId: string; id: string }, ContactRow | undefined>;

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
  private async changing<T>(accountId: string, id: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } finally {
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

  async getInTransaction(trx: Tx, accountId: string, id: string): Promise<Contact> {
    const row = await this.deps.contacts.find(accountId, id, trx);
    if (!row) throw new NotFound('contact', id);
    return toContact(row);
  }

  /** The contact with this phone, created (with its `contact.created` event) when there is none. */
  /** The contact with this phone, or a new one named `name` (a provider's profile name). */
  async findOrCreateByPhone(
    trx: Tx,
    accountId: string,
    phone: string,
    name: string | null = null,
  ): Promise<Contact> {
    checkPhone(phone);
    const now = this.deps.clock.now();
    const row: ContactRow = {
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
    if (await this.deps.contacts.insertIfPhoneFree(trx, row)) {
      const contact = toContact(row);
      await this.deps.outbox.record(trx, accountId, 'contact.created', contact);
      return contact;
    }
    return toContact((await this.deps.contacts.findByPhone(trx, accountId, phone))!);
  }

  async list(scope: Scope, filter: ContactFilter, page: PageRequest): Promise<PageResult<Contact>> {
    // Tags are stored trimmed, so the filter is trimmed the same way.
    const tag = filter.tag?.trim();
    const { rows, total } = await this.deps.contacts.list(
      scope.accountId,
      { ...filter, tag },
      page,
    );
    return { data: rows.map(toContact), total, page: page.page };
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
