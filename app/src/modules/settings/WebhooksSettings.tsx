import { ComingSoon } from '../../pages/PlaceholderPage.js';

/** Settings › Webhooks. */
export function WebhooksSettings(_props: { rest: string[] }) {
  return <ComingSoon title="Webhooks" />;
}
