import type { ChannelProvider, OutboundMessage } from '../../src/channels/channel.js';

/**
 * A provider that answers every send after `delayMs`, so that many sends are in flight at once
 * and are queued and recorded in groups. It accepts each (provider id `p_{message id}`) unless
 * `refuse` gives a reason to fail it for good. Named as the sandbox, which addresses every
 * contact (a real provider needs an identity). `calls` holds what it was given.
 */
export function slowProvider(
  delayMs: number,
  refuse: (m: OutboundMessage) => string | null = () => null,
): { provider: ChannelProvider; calls: OutboundMessage[] } {
  const calls: OutboundMessage[] = [];
  const provider: ChannelProvider = {
    name: 'sandbox',
    templatesBypassWindow: true,
    reachesAnyContact: true,
    send: async (m) => {
      calls.push(m);
      await new Promise((r) => setTimeout(r, delayMs));
      const reason = refuse(m);
      return reason === null
        ? { status: 'accepted', providerMessageId: `p_${m.messageId}` }
        : { status: 'failed', reason };
    },
  };
  return { provider, calls };
}
