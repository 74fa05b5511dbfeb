import type { Clock } from '../clock.js';
import type { ReadCache } from '../db/read-cache.js';
import type { Tx } from '../db/database.js';
import type { IdentityChannel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { Conflict, NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import { changing, MAX_TAGS, toContact } from './contact.js';
import type { ContactRecord, StoredIdentity } from './contact-columns.js';
import type { ContactsRepository } from './contacts.repository.js';
import type { Contact } from './contacts.schema.js';
import type { ContactIdentitiesRepository } from './identities.repository.js';
import type { ContactMergeRepository } from './merge.repository.js';

/**
 * Two contacts that are one person folded into one: `POST /v1/contacts/{id}/merge`, and an
 * anonymous webchat visitor who identifies as a contact known already.
 */
export class ContactMerge {
  constructor(
    private readonly deps: {
      tx: Transactor;
      contacts: ContactsRepository;
      identities: ContactIdentitiesRepository;
      merges: ContactMergeRepository;
      outbox: Outbox;
      clock: Clock;
      /** The contacts cached as presented (see ContactsService); both contacts' copies go. */
      cache: ReadCache<Contact>;
    },
  ) {}

  /**
   * Folds `otherId` into contact `id` (one person met on two channels), in one transaction with
   * both contacts locked in id order: the other's identities, conversations (with their
   * messages and notes) and tags move over, its custom fields fill keys this contact lacks, a
   * missing phone, name or email is taken from it, and it is deleted. Refused with 409 when both
   * have an identity on one channel (two phones, two PSIDs). When both merely have a conversation
   * on one channel (possible without identities through the sandbox), the other's is folded into
   * this one's: a contact has one conversation per channel. Emits `contact.updated` for the
   * contact merged into (the other one's deletion has no event).
   */
  async merge(scope: Scope, id: string, otherId: string): Promise<Contact> {
    if (otherId === id)
      throw new ValidationError('contact_id', 'must be another contact than the one merged into');
    return changing(this.deps.cache, scope.accountId, [id, otherId], () =>
      this.deps.tx.run(scope, async (trx) => {
        const locked = await this.deps.merges.lockForMerge(trx, scope.accountId, [id, otherId]);
        const into = locked.get(id);
        if (!into) throw new NotFound('contact', id);
        const other = locked.get(otherId);
        if (!other) throw new NotFound('contact', otherId);
        return this.mergeLocked(trx, scope, into, other);
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
    const holder = await this.deps.identities.findByIdentity(scope.accountId, channel, anonymousId);
    if (!holder || holder.id === intoId) return false;
    const { accountId } = scope;
    try {
      await changing(this.deps.cache, accountId, [intoId, holder.id], () =>
        this.deps.tx.run(scope, async (trx) => {
          const locked = await this.deps.merges.lockForMerge(trx, accountId, [intoId, holder.id]);
          const into = locked.get(intoId);
          const other = locked.get(holder.id);
          const anonymous = (i: StoredIdentity) => i.channel === channel && i.id === anonymousId;
          if (!into || !other || !other.identities.some(anonymous))
            throw new Conflict('the contacts changed while the visitor identified');
          await this.deps.identities.deleteIdentity(trx, accountId, channel, anonymousId);
          const conversations = await this.deps.merges.lockConversationChannels(trx, accountId, [
            intoId,
            holder.id,
          ]);
          const on = (contactId: string) =>
            conversations.find((c) => c.contact_id === contactId && c.channel === channel);
          const from = on(holder.id);
          const to = on(intoId);
          if (from && to)
            await this.deps.merges.foldConversation(
              trx,
              accountId,
              from.id,
              to.id,
              this.deps.clock.now(),
            );
          await this.mergeLocked(trx, scope, into, {
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

  /** `merge` with both contacts locked (see there), with its `contact.updated`. */
  private async mergeLocked(
    trx: Tx,
    scope: Scope,
    into: ContactRecord,
    other: ContactRecord,
  ): Promise<Contact> {
    const { accountId } = scope;
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
    const conversations = await this.deps.merges.lockConversationChannels(trx, accountId, [
      id,
      otherId,
    ]);
    const now = this.deps.clock.now();
    for (const c of conversations) {
      if (c.contact_id !== otherId) continue;
      const twin = conversations.find((o) => o.contact_id === id && o.channel === c.channel);
      if (twin) await this.deps.merges.foldConversation(trx, accountId, c.id, twin.id, now);
    }
    await this.deps.merges.moveBelongings(trx, accountId, otherId, id);
    // Deleted before its phone is given to the merged contact, which the phone's unique key needs.
    await this.deps.contacts.delete(trx, accountId, otherId);
    const merged = await this.deps.merges.replaceFields(trx, accountId, id, {
      phone: into.phone ?? other.phone,
      name: into.name ?? other.name,
      email: into.email ?? other.email,
      tags,
      custom_fields: { ...other.custom_fields, ...into.custom_fields },
      updated_at: now,
    });
    const contact = toContact(merged);
    await this.deps.outbox.record(trx, accountId, 'contact.updated', contact, scope.actor);
    return contact;
  }
}
