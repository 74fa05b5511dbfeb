import { ComingSoon } from '../../pages/PlaceholderPage.js';

/** Settings › Your account. */
export function AccountSettings(_props: { rest: string[] }) {
  return <ComingSoon title="Your account" />;
}
