import { ComingSoon } from './PlaceholderPage.js';

/** Broadcasts (`/broadcasts/…`). */
export function BroadcastsPage(_props: { rest: string[] }) {
  return <ComingSoon title="Broadcasts" />;
}
