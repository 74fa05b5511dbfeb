import { sql, type Kysely } from 'kysely';

// Contacts met on Messenger, Instagram or webchat are known by that channel's id for them (a
// PSID, an IGSID, a verified webchat identifier), not by a phone. The phone becomes optional
// and those ids are kept beside the contact. A WhatsApp identity is the phone itself and is
// never stored here, so the two can never disagree.
export async function up(db: Kysely<unknown>): Promise<void> {
  // contacts_phone (account_id, phone) stays unique: PostgreSQL treats NULLs as distinct, so
  // any number of phone-less contacts coexist while a phone still belongs to one contact.
  await sql`ALTER TABLE contacts ALTER COLUMN phone DROP NOT NULL`.execute(db);

  // The primary key makes an id name one contact per account and channel (race-safe creation
  // by INSERT … ON CONFLICT); contact_identities_contact allows one id per contact and channel
  // (what merging checks) and finds a contact's ids. Deleting a contact frees its ids, as it
  // frees its phone.
  await sql`
    CREATE TABLE contact_identities (
      account_id text COLLATE "C" NOT NULL,
      contact_id text COLLATE "C" NOT NULL,
      channel text NOT NULL CHECK (channel IN ('instagram', 'messenger', 'webchat')),
      external_id text COLLATE "C" NOT NULL CHECK (length(external_id) BETWEEN 1 AND 256),
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, channel, external_id),
      FOREIGN KEY (account_id, contact_id) REFERENCES contacts (account_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX contact_identities_contact ON contact_identities (account_id, contact_id, channel)`.execute(
    db,
  );

  // A contact as the API shows it carries its identities, so the contact read cache must hear
  // of every change to them, whichever write path makes it (see migration 006).
  await sql`
    CREATE FUNCTION switchboard_notify_contact_identity() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('switchboard_cache', 'contact ' || OLD.account_id || ' ' || OLD.contact_id);
      END IF;
      IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('switchboard_cache', 'contact ' || NEW.account_id || ' ' || NEW.contact_id);
      END IF;
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER contact_identities_cache AFTER INSERT OR UPDATE OR DELETE ON contact_identities
    FOR EACH ROW EXECUTE FUNCTION switchboard_notify_contact_identity()`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
