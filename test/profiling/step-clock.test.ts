// The profiler's step clock (runtime/step-clock.ts): native/clock's counter, called by V8 as a fast
// API call, where the kernel trusts the CPU's time-stamp counter; performance.now() otherwise or
// when PROXY_STEP_CLOCK=performance asks for it. Durations read from it agree with performance.now().
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

test('the step clock is the time-stamp counter where the kernel keeps time with it, else performance.now() with the reason', () => {
  if (process.arch === 'x64' && clocksource() === 'tsc') {
    assert.equal(stepClock.source, 'rdtsc', stepClock.reason);
    assert.equal(stepClock.reason, '');
    assert.ok(NS_PER_TICK > 0.01 && NS_PER_TICK < 100, `${NS_PER_TICK} ns per tick`);
  } else if (process.arch === 'x64') {
    assert.equal(stepClock.source, 'performance.now');
    assert.match(stepClock.reason, /clocksource/);
  } else {
    assert.equal(stepClock.source, 'monotonic');
    assert.equal(NS_PER_TICK, 1);
  }
});

test('optimised code reads the counter through the fast call, not the slow callback', { skip: stepClock.addon === null }, () => {
  const addon = stepClock.addon!;
  const stamps = new Float64Array(8);
  const loop = (n: number) => { for (let i = 0; i < n; i++) stamps[i & 7] = stepNow(); };
  // The calls made before V8 optimises the loop take the slow path: warm it first.
  for (let r = 0; r < 5; r++) loop(200_000);
  const before = addon.slowCalls();
  const calls = 1_000_000;
  loop(calls);
  const slow = addon.slowCalls() - before;
  assert.ok(slow < calls / 1000, `${slow} of ${calls} calls took the slow path`);
  assert.ok(stamps[7]! > 0);
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
