// Timers for durations an operator writes (`rollback_rules.check_interval`,
// `canary.baseline_grace_period`): any length the duration syntax allows. Node's setTimeout and
// setInterval take at most 2^31 - 1 ms (about 24.8 days); a longer delay is replaced by 1 ms with
// a TimeoutOverflowWarning, so a check_interval of "600h" evaluated every millisecond and a grace
// period of "720h" released the old baseline at once. These wait a long delay out in steps.
import { MAX_TIMER_MS } from '../config/index.ts';

export { MAX_TIMER_MS };

/** Calls `fn` once after `ms` (any length; unref'd); returns a cancel function. */
export function longTimeout(ms: number, fn: () => void): () => void {
  let t: NodeJS.Timeout | null = null;
  const arm = (left: number) => {
    t = setTimeout(() => {
      if (left > MAX_TIMER_MS) arm(left - MAX_TIMER_MS);
      else fn();
    }, Math.min(left, MAX_TIMER_MS));
    t.unref();
  };
  arm(ms);
  return () => { if (t !== null) clearTimeout(t); };
}

/** Calls `fn` every `ms` (any length; unref'd); returns a cancel function. */
export function longInterval(ms: number, fn: () => void): () => void {
  if (ms <= MAX_TIMER_MS) {
    const t = setInterval(fn, ms);
    t.unref();
    return () => clearInterval(t);
  }
  let cancelled = false;
  let cancel = () => {};
  const next = () => {
    cancel = longTimeout(ms, () => {
      if (cancelled) return;
      next();
      fn();
    });
  };
  next();
  return () => { cancelled = true; cancel(); };
}
