import { ComingSoon } from './PlaceholderPage.js';

/** Getting started: the new account's checklist (`/getting-started`). */
export function GettingStartedPage() {
  return <ComingSoon title="Getting started" />;
}
