import { normaliseTags } from '../contacts/contacts.service.js';
import { ValidationError } from '../errors.js';
import type { BroadcastRow } from './broadcasts.repository.js';
import type { Broadcast, CreateBroadcastBody } from './broadcasts.schema.js';

// The broadcast as the API shows it, and the rules a new one is checked against.

export const MIN_SCHEDULE_AHEAD_MS = 5 * 60 * 1000;
export const TEMPLATE_FIELDS = { name: 'message.template_name', params: 'message.template_params' };

/**
 * How long a broadcast whose recipients are all queued waits before looking again for messages
 * still queued: a second at first, growing with the wait to a minute (retries run up to a day).
 */
export function awaitingCheckMs(waitedMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.round(waitedMs / 10)));
}

export function toBroadcast(r: BroadcastRow): Broadcast {
  return {
    id: r.id,
    name: r.name,
    channel: r.channel,
    audience: r.audience as Broadcast['audience'],
    message: r.message,
    status: r.status,
    stats: {
      sent: r.sent,
      delivered: r.delivered,
      read: r.read,
      replied: r.replied,
      failed: r.failed,
    },
    failure_reason: r.status === 'failed' ? r.failure_reason : null,
    scheduled_at: r.scheduled_at ? r.scheduled_at.toISOString() : null,
    created_at: r.created_at.toISOString(),
  };
}

/**
 * The audience as a broadcast (and its preview) reads it, once checked: tags trimmed as stored
 * tags are, so that " vip" finds the contacts tagged "vip".
 */
export function checkedAudience(
  audience: CreateBroadcastBody['audience'],
): CreateBroadcastBody['audience'] {
  checkAudience(audience);
  return audience.tags
    ? { ...audience, tags: normaliseTags(audience.tags, 'audience.tags') }
    : audience;
}

function checkAudience(audience: CreateBroadcastBody['audience']): void {
  const { tags, lifecycle_stage: stage, all } = audience;
  if (all !== undefined) {
    if (tags !== undefined || stage !== undefined)
      throw new ValidationError('audience.all', 'cannot be combined with tags or lifecycle_stage');
    if (!all) throw new ValidationError('audience.all', 'must be true when given');
  } else if (tags === undefined && stage === undefined) {
    throw new ValidationError('audience', 'needs at least one of tags, lifecycle_stage or all');
  }
}

export function checkMessage(message: CreateBroadcastBody['message']): void {
  if (message.type === 'text') {
    if (message.content === undefined)
      throw new ValidationError('message.content', 'is required when type is text');
    if (message.template_name !== undefined)
      throw new ValidationError('message.template_name', 'is not allowed when type is text');
    if (message.template_params !== undefined)
      throw new ValidationError('message.template_params', 'is not allowed when type is text');
  } else {
    if (message.template_name === undefined)
      throw new ValidationError('message.template_name', 'is required when type is template');
    if (message.content !== undefined)
      throw new ValidationError('message.content', 'is not allowed when type is template');
  }
}
