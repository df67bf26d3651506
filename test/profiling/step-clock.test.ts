// The profiler's step clock (runtime/step-clock.ts): native/clock's counter, called by V8 as a fast
// API call: the CPU's time-stamp counter where the kernel trusts it, CLOCK_MONOTONIC otherwise;
// performance.now() when PROXY_STEP_CLOCK=performance asks for it. Durations read from it agree with performance.now().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { stepClock, stepNow, NS_PER_TICK } from '../../runtime/step-clock.ts';

function clocksource(): string {
  try {
    return readFileSync('/sys/devices/system/clocksource/clocksource0/current_clocksource', 'utf8').trim();
  } catch {
    return '';
  }
}

test('the step clock is the time-stamp counter where the kernel keeps time with it, else the monotonic clock with the reason', () => {
  if (process.arch === 'x64' && clocksource() === 'tsc') {
    assert.equal(stepClock.source, 'rdtsc', stepClock.reason);
    assert.equal(stepClock.reason, '');
    assert.ok(NS_PER_TICK > 0.01 && NS_PER_TICK < 100, `${NS_PER_TICK} ns per tick`);
  } else if (process.arch === 'x64') {
    assert.equal(stepClock.source, 'monotonic');
    assert.match(stepClock.reason, /clocksource/);
    assert.equal(NS_PER_TICK, 1);
  } else {
    assert.equal(stepClock.source, 'monotonic');
    assert.equal(NS_PER_TICK, 1);
  }
  assert.equal(stepClock.now, stepClock.source === 'rdtsc' ? stepClock.addon!.ticks : stepClock.addon!.monotonic);
});

/** How many of a million calls of `loop` (an optimised loop reading one clock, its own function so
 *  that its call site sees one target) took the addon's slow path. */
function slowReads(loop: (n: number) => void): number {
  const addon = stepClock.addon!;
  // The calls made before V8 optimises the loop take the slow path: warm it first.
  for (let r = 0; r < 5; r++) loop(200_000);
  const before = addon.slowCalls();
  loop(1_000_000);
  return addon.slowCalls() - before;
}

const stamps = new Float64Array(8);

test('optimised code reads the step clock through the fast call, not the slow callback', { skip: stepClock.addon === null }, () => {
  const slow = slowReads((n) => { for (let i = 0; i < n; i++) stamps[i & 7] = stepNow(); });
  assert.ok(slow < 1000, `${slow} of 1000000 calls took the slow path`);
  assert.ok(stamps[7]! > 0);
});

test('both of the addon\'s clocks are fast calls (the counter and the monotonic clock)', { skip: stepClock.addon === null }, () => {
  const { ticks, monotonic } = stepClock.addon!;
  const slowTicks = slowReads((n) => { for (let i = 0; i < n; i++) stamps[i & 7] = ticks(); });
  assert.ok(slowTicks < 1000, `ticks: ${slowTicks} of 1000000 calls took the slow path`);
  const slowMonotonic = slowReads((n) => { for (let i = 0; i < n; i++) stamps[i & 7] = monotonic(); });
  assert.ok(slowMonotonic < 1000, `monotonic: ${slowMonotonic} of 1000000 calls took the slow path`);
});

/** A step-clock reading and the performance.now() time it was taken at: read between two
 *  performance.now() reads less than 5 µs apart (the test was not preempted in between). */
function paired(): [number, number] {
  for (;;) {
    const before = performance.now();
    const ticks = stepNow();
    const after = performance.now();
    if (after - before < 0.005) return [ticks, (before + after) / 2];
  }
}

test('a duration read from the step clock is the one performance.now() reads', () => {
  for (const ms of [5, 40]) {
    const [t0, p0] = paired();
    while (performance.now() - p0 < ms);
    const [t1, p1] = paired();
    const stepMs = ((t1 - t0) * NS_PER_TICK) / 1e6;
    const perfMs = p1 - p0;
    assert.ok(Math.abs(stepMs - perfMs) < 0.01 * perfMs + 0.01, `${ms} ms: step clock ${stepMs} ms, performance.now ${perfMs} ms`);
  }
  const a = stepNow();
  const b = stepNow();
  assert.ok(b >= a, 'readings do not go back');
});

/** [source, reason, warning, NS_PER_TICK] of the step clock of a process started with PROXY_STEP_CLOCK=`value`. */
function clockWith(value: string): [string, string, string, number] {
  const script = 'import(\'./runtime/step-clock.ts\').then(({ stepClock: c, NS_PER_TICK }) => '
    + 'console.log(JSON.stringify([c.source, c.reason, c.warning, NS_PER_TICK])))';
  const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
    encoding: 'utf8', env: { ...process.env, PROXY_STEP_CLOCK: value },
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('PROXY_STEP_CLOCK=performance keeps performance.now(), and says why', () => {
  assert.deepEqual(clockWith('performance'), ['performance.now', 'PROXY_STEP_CLOCK=performance', '', 1e6]);
});

test('a PROXY_STEP_CLOCK value that is not a choice is named in a warning, and the clock is chosen as without it', () => {
  const [source, reason, warning] = clockWith('tsc');
  assert.equal(warning, 'PROXY_STEP_CLOCK=tsc is not a choice (the one choice is "performance"): ignored');
  assert.equal(source, stepClock.source);
  assert.equal(reason, stepClock.reason);
});
