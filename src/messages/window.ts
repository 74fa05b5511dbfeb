import type { ChannelProvider } from '../channels/channel.js';
import { WINDOWED_CHANNELS } from '../channels/channel.js';
import type { Channel, MessageType } from '../db/schema.js';
import { AppError } from '../errors.js';

/**
 * The 24-hour customer service window: on a windowed channel, a contact may be sent a message
 * only within 24 hours of their last one, but for the templates the provider lets through it
 * (`ChannelProvider.templatesBypassWindow`). Where the window is checked, see
 * `QueueRepository.queue`; this says which sends it applies to, and how a refusal reads.
 */
export const CUSTOMER_WINDOW_MS = 24 * 60 * 60 * 1000;

/** Whether a send waits for the contact's 24-hour window. */
export function windowed(channel: Channel, provider: ChannelProvider, type: MessageType): boolean {
  return WINDOWED_CHANNELS.has(channel) && (type !== 'template' || !provider.templatesBypassWindow);
}

/** When a window must have opened for a send at `now` to be inside it (exclusive). */
export function windowStart(now: Date): Date {
  return new Date(now.getTime() - CUSTOMER_WINDOW_MS);
}

/** The refusal of a send outside the contact's window. */
export function outsideWindow(channel: Channel, provider: ChannelProvider): AppError {
  return provider.templatesBypassWindow
    ? new AppError(
        'validation_error',
        `outside the 24-hour customer service window on ${channel}: the contact has not written in the last 24 hours; send an approved template instead`,
        422,
        [{ field: 'type', issue: 'a template is required outside the 24-hour window' }],
      )
    : new AppError(
        'validation_error',
        `outside the 24-hour customer service window on ${channel}: the contact has not written in the last 24 hours, and ${channel} allows no message (templates included) until they write again`,
        422,
        [{ field: 'contact_id', issue: 'has not written in the last 24 hours' }],
      );
}
