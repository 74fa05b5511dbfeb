import { ComingSoon } from '../../pages/PlaceholderPage.js';

/** Settings › Templates. */
export function TemplatesSettings(_props: { rest: string[] }) {
  return <ComingSoon title="Templates" />;
}
