/** Delays before each retry after a failed attempt; past the last one the delivery is given up. */
export const RETRY_SCHEDULE_MS = [
  5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 10_800_000, 21_600_000, 43_200_000,
  86_400_000, 86_400_000,
];

const MAX_RETRY_AFTER_MS = 86_400_000;

/** Seconds or an HTTP date, as Retry-After allows; undefined when absent or unreadable. */
export function parseRetryAfter(
  value: string | string[] | undefined,
  now: Date,
): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim()) * 1000;
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

/**
 * The wait before the next attempt after `attemptsMade` failed ones: the schedule with ±20 %
 * jitter, or the receiver's Retry-After when it gave one; undefined when it is time to give up.
 */
export function nextRetryDelayMs(
  attemptsMade: number,
  retryAfterMs: number | undefined,
  random: () => number,
): number | undefined {
  const base = RETRY_SCHEDULE_MS[attemptsMade - 1];
  if (base === undefined) return undefined;
  if (retryAfterMs !== undefined) return Math.min(Math.max(retryAfterMs, 1000), MAX_RETRY_AFTER_MS);
  return Math.round(base * (0.8 + 0.4 * random()));
}
