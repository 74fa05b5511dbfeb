import { createHook } from 'node:async_hooks';

/**
 * Counts the timers (`setTimeout`, `AbortSignal.timeout`, ref'd or not) created while it is
 * on and still pending: a timer that fires or is cleared stops counting. For checks that a
 * code path leaves no timer behind it, since each one is kept alive until it runs out.
 */
export function trackTimers(): { pending: () => number; stop: () => void } {
  const live = new Set<number>();
  const hook = createHook({
    init(id, type) {
      if (type === 'Timeout') live.add(id);
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  return { pending: () => live.size, stop: () => hook.disable() };
}
