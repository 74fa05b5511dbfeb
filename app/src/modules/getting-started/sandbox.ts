// "Try the sandbox", the first step's other way: a sample customer writes in on a channel the
// sandbox serves, through the same public routes a developer's script would use
// (POST /v1/contacts, POST /v1/sandbox/inbound), and the admin answers them in the inbox.
import { ApiError, api, data } from '../../api/client.js';
import type { Channel } from '../../api/types.js';

/**
 * The sample customer: one contact per account, found again on a second try. A fictional
 * number (555-01xx), not one of `switchboard demo`'s, and not ending in 0000 (which the
 * sandbox fails on purpose).
 */
export const SANDBOX_CUSTOMER = {
  phone: '+13125550199',
  name: 'Sandbox customer',
  tag: 'sandbox',
} as const;

const GREETING =
  "Hi! I'm a sample customer, written in by the sandbox. Reply here: the sandbox delivers your answer and marks it read, as a phone would.";

/** Whether the sandbox simulates this channel now (it has no connection of its own). */
export const onSandbox = (c: { provider: string | null; status: string }) =>
  c.provider === 'sandbox' && c.status === 'not_connected';

/** Writes in as the sample customer on `channel`; answers the conversation it landed in. */
export async function trySandbox(channel: Channel): Promise<string> {
  try {
    await data(
      api.POST('/v1/contacts', {
        body: {
          phone: SANDBOX_CUSTOMER.phone,
          name: SANDBOX_CUSTOMER.name,
          tags: [SANDBOX_CUSTOMER.tag],
        },
      }),
    );
  } catch (err) {
    // Made by an earlier try (or by hand): it writes in again as it is.
    if (!(err instanceof ApiError && err.status === 409)) throw err;
  }
  const message = await data(
    api.POST('/v1/sandbox/inbound', {
      body: { channel, phone: SANDBOX_CUSTOMER.phone, type: 'text', content: GREETING },
    }),
  );
  return message.conversation_id;
}
