import { ComingSoon } from '../../pages/PlaceholderPage.js';

/** Settings › Team. */
export function TeamSettings(_props: { rest: string[] }) {
  return <ComingSoon title="Team" />;
}
