// Fuel metering (runtime/wasm/metering-worker.mjs) charges one unit per loop iteration and per entry
// into a function that calls a function of the module; leaf functions and returns are free. These
// hand-written plugins pin that down: every way to run unbounded (an endless loop, recursion, a
// call chain in a loop) still runs out of fuel through the real host, and the exact budgets show
// what is and is not charged. Modules are assembled with binaryen's wasm-as (plain Node: binaryen
// imports slowly through the TypeScript loader).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { PluginHarness, Verdict } from '../../sdk/testing/index.ts';
import { ABI_VERSION, ABI_VERSION_EXPORT } from '../../runtime/wasm/abi-spec.ts';
import { instrumentModule, meteringWorkerRunning, setMeteringIdleMs } from '../../runtime/wasm/metering.ts';
import { until } from '../helpers/until.ts';

const WASM_AS = resolve('node_modules/binaryen/bin/wasm-as');
const dir = mkdtempSync(join(tmpdir(), 'metering-'));

/** A plugin whose proxy_on_request runs `body` (then continues), with `funcs` beside it. */
async function plugin(name: string, funcs: string, body: string): Promise<string> {
  const wat = `(module
    (memory (export "memory") 1)
    (table 4 funcref)
    (global (export "${ABI_VERSION_EXPORT}") i32 (i32.const ${ABI_VERSION}))
    ${funcs}
    (func (export "proxy_on_request") (param i32 i32 i32) (result i32) (local $i i32)
      ${body}
      (i32.const 0)))`;
  const src = join(dir, `${name}.wat`);
  const out = join(dir, `${name}.wasm`);
  writeFileSync(src, wat);
  await promisify(execFile)(process.execPath, [WASM_AS, src, '-o', out, '--enable-bulk-memory', '--enable-reference-types']);
  return out;
}

/** A straight line of `n` calls of $leaf (no loop). */
const leafCalls = (n: number): string => Array.from({ length: n }, (_, k) => `(drop (call $leaf (i32.const ${k})))`).join(' ');
/** A leaf: no loop, no call of a module function; an early return for odd arguments. */
const LEAF = '(func $leaf (param $x i32) (result i32) (if (i32.and (local.get $x) (i32.const 1)) (then (return (local.get $x)))) ' +
  '(i32.add (local.get $x) (i32.const 1)))';
/** $c1 → $c2 → $c3 → $c4 → $leaf: four functions that call a module function, then a leaf. */
const CHAIN = `${LEAF}
  (func $c4 (param i32) (result i32) (call $leaf (local.get 0)))
  (func $c3 (param i32) (result i32) (call $c4 (local.get 0)))
  (func $c2 (param i32) (result i32) (call $c3 (local.get 0)))
  (func $c1 (param i32) (result i32) (call $c2 (local.get 0)))`;

const modules = Promise.all([
  plugin('spin', '', '(loop $l (br $l))'),
  // 2^60 calls, 60 deep: no loop anywhere and no stack overflow, only fuel stops it.
  plugin('fanout', '(func $f (param $d i32) (if (local.get $d) (then (call $f (i32.sub (local.get $d) (i32.const 1))) ' +
    '(call $f (i32.sub (local.get $d) (i32.const 1))))))', '(call $f (i32.const 60))'),
  plugin('recurse', '(func $r (param i32) (result i32) (call $r (i32.add (local.get 0) (i32.const 1))))', '(drop (call $r (i32.const 0)))'),
  plugin('chain_forever', CHAIN, '(loop $l (drop (call $c1 (local.get $i))) (br $l))'),
  // 100 iterations × (1 loop + 4 chain entries) + 1 entry of proxy_on_request (it calls $c1) = 501.
  plugin('chain_100', CHAIN, '(loop $l (drop (call $c1 (local.get $i))) (local.set $i (i32.add (local.get $i) (i32.const 1))) ' +
    '(br_if $l (i32.lt_u (local.get $i) (i32.const 100))))'),
  plugin('leaves', LEAF, leafCalls(200)),
  // table.fill has no expression getters in binaryen.js: the walk cannot read this module, so it
  // is charged at every function entry, return and loop iteration, as log-execution does.
  plugin('unread', LEAF, `(table.fill (i32.const 0) (ref.null func) (i32.const 1)) ${leafCalls(10)}`),
  plugin('unread_spin', '', '(table.fill (i32.const 0) (ref.null func) (i32.const 1)) (loop $l (br $l))'),
]).then(([spin, fanout, recurse, chainForever, chain100, leaves, unread, unreadSpin]) =>
  ({ spin, fanout, recurse, chainForever, chain100, leaves, unread, unreadSpin }));

let pipelines = 0;
/** Runs one request through the module with `fuel`; the slot's last error, or null when it ran through. */
async function run(wasm: string, fuel: number): Promise<string | null> {
  const h = await PluginHarness.load(wasm, { on_error: 'open', fuel, pipelineId: `metering-${pipelines++}` });
  const slot = h.pipeline.steps.get(basename(wasm, '.wasm'))!.slot;
  const t0 = performance.now();
  const r = h.request({ find: 'a' });
  const ms = performance.now() - t0;
  assert.equal(r.verdict, Verdict.Continue);
  assert.ok(ms < 10_000, `stopped in ${ms} ms`);
  if (slot.traps === 0) {
    assert.equal(h.records.at(-1)?.error, false);
    return null;
  }
  assert.equal(h.records.at(-1)?.error, true);
  return slot.lastError;
}

test('an endless loop runs out of fuel', async () => {
  assert.match(await run((await modules).spin, 1_000_000) ?? 'ran through', /exceeded its fuel budget \(1000000\)/);
});

test('endless recursion runs out of fuel: a 2^60-call tree without loops, and self-recursion before the stack overflows', async () => {
  const m = await modules;
  assert.match(await run(m.fanout, 1_000_000) ?? 'ran through', /exceeded its fuel budget \(1000000\)/);
  assert.match(await run(m.recurse, 1000) ?? 'ran through', /exceeded its fuel budget \(1000\)/);
});

test('a deep non-recursive call chain in an endless loop runs out of fuel', async () => {
  assert.match(await run((await modules).chainForever, 1_000_000) ?? 'ran through', /exceeded its fuel budget/);
});

test('each loop iteration and each entry into a function that calls a module function costs one unit; a leaf costs none', async () => {
  const m = await modules;
  assert.equal(await run(m.chain100, 501), null, '501 units: 100 × (loop + $c1..$c4) + proxy_on_request');
  assert.match(await run(m.chain100, 500) ?? 'ran through', /exceeded its fuel budget \(500\)/);
});

test('calls of leaf functions outside loops are free, their returns too: 200 of them fit in 1 unit', async () => {
  const m = await modules;
  assert.equal(await run(m.leaves, 1), null, 'the one unit is proxy_on_request\'s entry (it calls $leaf)');
  assert.match(await run(m.leaves, 0) ?? 'ran through', /exceeded its fuel budget \(0\)/);
});

test('a module the analysis cannot read is charged everywhere, and its endless loop still runs out', async () => {
  const m = await modules;
  assert.match(await run(m.unread, 20) ?? 'ran through', /exceeded its fuel budget \(20\)/, 'leaf entries and returns are charged');
  assert.equal(await run(m.unread, 1000), null);
  assert.match(await run(m.unreadSpin, 1_000_000) ?? 'ran through', /exceeded its fuel budget \(1000000\)/);
});

test('the metering worker (binaryen) stops once idle and starts again for the next module; jobs sent meanwhile are not lost', async () => {
  const was = setMeteringIdleMs(300);
  try {
    const bytes = readFileSync(await plugin('idle', '', '(nop)'));
    const opts = { name: 'wasm:idle', fuel: 1000, maxMemoryPages: 4 };
    await instrumentModule(bytes, opts);
    assert.equal(meteringWorkerRunning(), true, 'running after a job');
    // Jobs one after the other, each sent before the idle time ends: the same worker serves them.
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await instrumentModule(bytes, opts);
      assert.equal(meteringWorkerRunning(), true);
    }
    await until('the idle worker to stop', () => !meteringWorkerRunning(), 5000, 20);
    // A job right after the stop goes to a new worker, and several at once all resolve.
    const again = await Promise.all([1, 2, 3].map(() => instrumentModule(bytes, opts)));
    for (const m of again) assert.ok(WebAssembly.validate(m as Uint8Array<ArrayBuffer>), 'a valid metered module');
    assert.equal(meteringWorkerRunning(), true);
  } finally {
    setMeteringIdleMs(was);
  }
});
