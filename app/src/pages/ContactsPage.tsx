import '../modules/contacts-admin/contacts.css';
import { ContactDetail } from '../modules/contacts-admin/ContactDetail.js';
import { ContactImport } from '../modules/contacts-admin/ContactImport.js';
import { ContactsTable } from '../modules/contacts-admin/ContactsTable.js';
import { currentSession } from '../modules/session/session.js';

/** Contacts (`/contacts`, `/contacts/import` for admins, `/contacts/{id}`). */
export function ContactsPage({ rest }: { rest: string[] }) {
  const isAdmin = currentSession().user.role === 'admin';
  if (rest[0] === 'import') {
    if (isAdmin) return <ContactImport />;
    return (
      <div class="contacts-admin">
        <h1 id="page-title">Import contacts</h1>
        <p class="muted">Imports are for admins: ask an admin to import contacts.</p>
      </div>
    );
  }
  if (rest[0]) return <ContactDetail key={rest[0]} id={rest[0]} isAdmin={isAdmin} />;
  return <ContactsTable isAdmin={isAdmin} />;
}
