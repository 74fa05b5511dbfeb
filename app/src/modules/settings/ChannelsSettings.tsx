import { ComingSoon } from '../../pages/PlaceholderPage.js';

/** Settings › Channels. */
export function ChannelsSettings(_props: { rest: string[] }) {
  return <ComingSoon title="Channels" />;
}
