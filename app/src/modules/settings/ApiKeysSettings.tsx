import { ComingSoon } from '../../pages/PlaceholderPage.js';

/** Settings › API keys. */
export function ApiKeysSettings(_props: { rest: string[] }) {
  return <ComingSoon title="API keys" />;
}
