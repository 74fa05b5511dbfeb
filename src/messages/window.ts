import type { ChannelProvider } from '../channels/channel.js';

/**
 * Whether an approved template may be sent outside the 24-hour customer service window with
 * this provider, as Meta applies the window on each channel (DESIGN §4 "Sending"):
 * - WhatsApp Cloud API: yes, that is what approved templates are for;
 * - the sandbox: yes, it simulates WhatsApp's rule on every windowed channel (as before);
 * - Messenger and Instagram: no. Meta has no approved templates there: a template is sent as
 *   its rendered text and follows the window like any text.
 * Webchat has no window at all, so the answer does not matter there.
 */
export function templatesBypassWindow(provider: ChannelProvider['name']): boolean {
  switch (provider) {
    case 'sandbox':
    case 'whatsapp_cloud':
    case 'webchat':
      return true;
    case 'messenger':
    case 'instagram':
      return false;
  }
}
