import { ComingSoon } from './PlaceholderPage.js';

/** Contacts (`/contacts/…`). */
export function ContactsPage(_props: { rest: string[] }) {
  return <ComingSoon title="Contacts" />;
}
