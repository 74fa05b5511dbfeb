import './webhooks/webhooks.css';
import './channels/channels.css';
import { keys } from '../../api/keys.js';
import { useQuery } from '../../lib/query.js';
import { MetaChannel } from './channels/MetaChannel.js';
import { WebchatChannel } from './channels/WebchatChannel.js';
import { listChannels } from './channels/channels-data.js';

/** Settings › Channels: each channel's connection, with what connects or changes it. */
export function ChannelsSettings(_props: { rest: string[] }) {
  const channels = useQuery({
    queryKey: keys.channels(),
    queryFn: ({ signal }) => listChannels(signal),
  });
  return (
    <section class="channels stack" aria-labelledby="page-title">
      <h1 id="page-title">Channels</h1>
      <p class="muted">
        A channel without a connection of its own uses the sandbox, which simulates the provider.
      </p>
      {channels.isError ? (
        <p role="alert">The channels could not be loaded: {channels.error.message}</p>
      ) : !channels.data ? (
        <p class="muted">Loading channels…</p>
      ) : (
        channels.data.data.map((c) =>
          c.channel === 'webchat' ? (
            <WebchatChannel key={c.channel} connection={c} />
          ) : (
            <MetaChannel key={c.channel} connection={c} />
          ),
        )
      )}
    </section>
  );
}
