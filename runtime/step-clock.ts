// The clock the profiler times steps and sub-operations with: read at every step boundary of a
// timed request (a dozen reads per request with the eight built-ins), so its cost is most of what
// timing a step costs. performance.now() takes ~35-46 ns a read; native/clock's time-stamp
// counter, called by V8 as a fast API call, ~10 ns, and its CLOCK_MONOTONIC read (the clock
// performance.now() reads, without the binding's cost) ~28 ns on a kvm-clock VM.
//
// Readings are in ticks and are only ever subtracted from one another: a duration in ns is
// (b - a) * NS_PER_TICK. Every other time in the proxy (when a request was read, the upstream
// call's stages, tracing's span times) stays performance.now() ms.
//
// native/clock is used when it is built (`npm run build`) and V8 calls it without leaving
// optimised code (`fast`): its time-stamp counter where the kernel uses that as its own
// clocksource (so it runs at a constant rate and agrees across CPUs), its CLOCK_MONOTONIC read
// otherwise (a VM's kvm-clock, hpet, another architecture). Without the addon, or with
// PROXY_STEP_CLOCK=performance in the environment, the clock is performance.now().
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

export const CLOCK_ADDON_PATH = resolve(dirname(fileURLToPath(import.meta.url)), '../native/clock/build/Release/clock.node');

interface ClockAddon {
  /** The counter since the addon was loaded. */
  ticks(): number;
  /** CLOCK_MONOTONIC ns since the addon was loaded. */
  monotonic(): number;
  /** ns per tick, measured against CLOCK_MONOTONIC over `ms` milliseconds. */
  nsPerTick(ms: number): number;
  /** Calls that took the slow (non-fast-API) path. */
  slowCalls(): number;
  /** Whether V8 was given the fast call (false: every call takes the slow path). */
  readonly fast: boolean;
  /** 'rdtsc' (x86-64) or 'monotonic' (CLOCK_MONOTONIC ns). */
  readonly source: string;
}

export interface StepClock {
  /** A reading, in ticks. */
  readonly now: () => number;
  /** ns per tick. */
  readonly nsPerTick: number;
  /** 'rdtsc', 'monotonic' or 'performance.now'. */
  readonly source: string;
  /** Why the time-stamp counter is not used (x86-64 only; '' elsewhere and with 'rdtsc'). */
  readonly reason: string;
  /** A PROXY_STEP_CLOCK value that is not a choice, said once at start (the clock is chosen as without it), else ''. */
  readonly warning: string;
  /** The addon, when it is used (tests read its slow-call count). */
  readonly addon: ClockAddon | null;
}

function performanceClock(reason: string, warning: string): StepClock {
  return { now: () => performance.now(), nsPerTick: 1e6, source: 'performance.now', reason, warning, addon: null };
}

function kernelClocksource(): string {
  try {
    return readFileSync('/sys/devices/system/clocksource/clocksource0/current_clocksource', 'utf8').trim();
  } catch {
    return '';
  }
}

function load(): StepClock {
  const choice = process.env.PROXY_STEP_CLOCK ?? '';
  if (choice === 'performance') return performanceClock('PROXY_STEP_CLOCK=performance', '');
  const warning = choice === '' ? '' : `PROXY_STEP_CLOCK=${choice} is not a choice (the one choice is "performance"): ignored`;
  let addon: ClockAddon;
  try {
    addon = createRequire(import.meta.url)(CLOCK_ADDON_PATH) as ClockAddon;
  } catch (err) {
    return performanceClock(`native/clock not loaded (${(err as Error).message.split('\n')[0]})`, warning);
  }
  if (!addon.fast) return performanceClock('this Node version gives native/clock no fast call', warning);
  if (addon.source !== 'rdtsc') return monotonicClock(addon, '', warning);
  const cs = kernelClocksource();
  if (cs !== 'tsc') return monotonicClock(addon, `the kernel's clocksource is ${cs === '' ? 'unknown' : `"${cs}"`}, not "tsc"`, warning);
  const nsPerTick = addon.nsPerTick(5);
  if (!(nsPerTick > 0.01 && nsPerTick < 100)) return monotonicClock(addon, `the counter's rate could not be measured (${nsPerTick} ns per tick)`, warning);
  const ticks = addon.ticks;
  return { now: ticks, nsPerTick, source: 'rdtsc', reason: '', warning, addon };
}

function monotonicClock(addon: ClockAddon, reason: string, warning: string): StepClock {
  const monotonic = addon.monotonic;
  return { now: monotonic, nsPerTick: 1, source: 'monotonic', reason, warning, addon };
}

/** The process's step clock, chosen once when this module loads. */
export const stepClock: StepClock = load();
/** stepClock.now, for the hot loops. */
export const stepNow: () => number = stepClock.now;
/** stepClock.nsPerTick. */
export const NS_PER_TICK: number = stepClock.nsPerTick;
