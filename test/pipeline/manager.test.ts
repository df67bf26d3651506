import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PipelineManager, Verdict, callbackRecorder, type StepRecorder, type PipelineConfig } from '../../runtime/pipeline/index.ts';
import { makeExchange } from '../../sdk/testing/index.ts';
import { fixture } from '../wasm/fixtures.ts';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

function recorder(enabled: boolean) {
  const rows: [string, number, boolean][] = [];
  const r: StepRecorder = callbackRecorder(enabled, (_p, s, ph, _ns, err) => { rows.push([s, ph, err]); });
  return { r, rows };
}

async function config(id: string, request: string[], response: string[], extra: Record<string, object> = {}): Promise<PipelineConfig> {
  const steps: PipelineConfig['steps'] = {};
  for (const n of new Set([...request, ...response].map((s) => s.replace(/^wasm:/, '')))) {
    steps[n] = { module: await fixture(n), config: {}, max_memory_pages: 32, ...extra[n] };
  }
  return { pipeline: { id, request, response }, steps };
}

test('steps run in order; a reject skips every later step; short names equal wasm:<name>', async () => {
  const { r, rows } = recorder(true);
  const m = new PipelineManager({ recorder: r, logger: quiet });
  await m.load(await config('p1', ['continue', 'wasm:props', 'trap'], ['props']));
  const ex = makeExchange({ drop: 'c', $db: 'app' }, 'p1');
  m.get('p1').runRequest(ex);
  assert.equal(ex.verdict, Verdict.Reject);
  assert.deepEqual(rows, [['wasm:continue', 0, false], ['wasm:props', 0, false]]);
});

test('local reply skips later request steps; the response phase still runs', async () => {
  const { r, rows } = recorder(true);
  const m = new PipelineManager({ recorder: r, logger: quiet });
  await m.load(await config('p2', ['props', 'trap'], ['continue']));
  const ex = makeExchange({ ping: 1 }, 'p2');
  const p = m.get('p2');
  p.runRequest(ex);
  assert.equal(ex.verdict, Verdict.LocalReply);
  p.runResponse(ex);
  assert.deepEqual(rows, [['wasm:props', 0, false], ['wasm:continue', 1, false]]);
  assert.equal(ex.phase, 1);
});

test('empty pipeline and recorder off: no steps, no records', async () => {
  const { r, rows } = recorder(false);
  const m = new PipelineManager({ recorder: r, logger: quiet });
  const ex = makeExchange({ find: 'c' }, 'default');
  m.get().runRequest(ex);
  m.get().runResponse(ex);
  assert.equal(ex.verdict, Verdict.Continue);
  await m.load(await config('default', ['continue'], []));
  m.get().runRequest(makeExchange({ find: 'c' }, 'default'));
  assert.equal(rows.length, 0, 'no timing with the recorder off');
});

test('a refused config or a missing module keeps the old graph, and is logged at warn (an operator\'s mistake, not an error of the proxy)', async () => {
  const lines: Array<[string, string]> = [];
  const m = new PipelineManager({ logger: { ...quiet, warn: (msg: string) => { lines.push(['warn', msg]); },
    error: (msg: string) => { lines.push(['error', msg]); } } });
  const good = await m.load(await config('p3', ['props'], []));
  await assert.rejects(m.load(await config('p3', ['props'], [], { props: { config: { refuse: true } } })), /refused its config/);
  assert.equal(m.get('p3'), good);
  await assert.rejects(m.load({ pipeline: { id: 'p3', request: ['nope'], response: [] },
    steps: { nope: { module: '/nonexistent.wasm', config: {}, max_memory_pages: 8 } } }), /cannot read/);
  assert.equal(m.get('p3'), good);
  assert.deepEqual(lines, [['warn', 'pipeline refused; the previous graph keeps running'], ['warn', 'pipeline refused; the previous graph keeps running']]);
});

test('atomic swap: requests in flight finish on the graph they started with', async () => {
  const m = new PipelineManager({ logger: quiet });
  await m.load(await config('p4', ['props'], []));
  let stop = false, served = 0, failures = 0;
  const seen = new Set<object>();
  const worker = (async () => {
    while (!stop) {
      const p = m.get('p4');
      seen.add(p);
      const ex = makeExchange({ drop: 'c', $db: 'x' }, 'p4');
      p.runRequest(ex);
      if (ex.verdict !== Verdict.Reject) failures++;
      served++;
      await new Promise((r) => setImmediate(r));
    }
  })();
  for (let i = 0; i < 5; i++) {
    await m.load(await config('p4', ['continue', 'props'], []));
    await m.load(await config('p4', ['props'], []));
  }
  stop = true;
  await worker;
  assert.equal(failures, 0);
  assert.ok(served > 0);
  assert.ok(seen.size > 1, 'requests observed more than one graph');
});

test('a step that declares its phases (Step.phases) is not called in the others', async () => {
  // The built-in logging and metrics act at the response phase only, route at the request phase
  // only: listed in both phases, each runs (and is timed) only where it acts.
  const { BUILTIN_PLUGIN_DIR } = await import('../../runtime/app/serve.ts');
  const { r, rows } = recorder(true);
  const m = new PipelineManager({ recorder: r, logger: quiet, pluginDir: BUILTIN_PLUGIN_DIR });
  const p = await m.load({
    pipeline: { id: 'phases', request: ['logging', 'metrics', 'route'], response: ['logging', 'metrics', 'route'] },
    steps: {
      logging: { config: { sample_rate: 0 }, max_memory_pages: 256 }, metrics: { config: {}, max_memory_pages: 256 },
      route: { config: { default: 'mongodb://127.0.0.1:1' }, max_memory_pages: 256 },
    },
  });
  const ex = makeExchange({ find: 'c', $db: 'app' }, 'phases');
  p.runRequest(ex);
  ex.replyBody = new Uint8Array([5, 0, 0, 0, 0]);
  p.runResponse(ex);
  assert.deepEqual(rows.map(([s, ph]) => [s, ph]), [['wasm:route', 0], ['wasm:logging', 1], ['wasm:metrics', 1]]);
  assert.equal(ex.route, 'mongodb://127.0.0.1:1', 'the request-phase step still ran');
  // the configured lists are unchanged (the admin API shows what was configured)
  assert.deepEqual(p.requestSteps.map((s) => s.id), ['wasm:logging', 'wasm:metrics', 'wasm:route']);
  assert.deepEqual(p.steps.get('logging')!.slot.phases, 2);
});
