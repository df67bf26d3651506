// Idle step cost: the same request through 0 and 16 `continue` steps (a plugin whose onRequest
// does nothing), with the recorder off (untimed loop) and on (one hrtime pair per step).
// Run: node --import tsx bench/idle-step.ts
import { PipelineManager, callbackRecorder, type StepRecorder, type PipelineConfig } from '../runtime/pipeline/index.ts';
import { makeExchange } from '../sdk/testing/index.ts';
import { fixture } from '../test/wasm/fixtures.ts';

const ITER = 200_000;
const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };
const path = await fixture('continue');

async function pipeline(steps: number, recording: boolean) {
  let sink = 0;
  const recorder: StepRecorder = callbackRecorder(recording, (_p, _s, _ph, ns) => { sink += ns; });
  const m = new PipelineManager({ recorder, logger: quiet });
  const names = Array.from({ length: steps }, (_, i) => `idle${i}`);
  const cfg: PipelineConfig = { pipeline: { id: 'bench', request: names, response: [] }, steps: {} };
  for (const n of names) cfg.steps[n] = { module: path, config: {}, max_memory_pages: 16 };
  await m.load(cfg);
  return m.get('bench');
}

function run(p: Awaited<ReturnType<typeof pipeline>>): number {
  const ex = makeExchange({ find: 'users', filter: { a: 1 }, $db: 'app' }, 'bench');
  for (let i = 0; i < 20_000; i++) { ex.verdict = 0; p.runRequest(ex); }
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ITER; i++) { ex.verdict = 0; p.runRequest(ex); }
  return Number(process.hrtime.bigint() - t0) / ITER;
}

for (const recording of [false, true]) {
  const p0 = await pipeline(0, recording);
  const p16 = await pipeline(16, recording);
  const best = (p: typeof p0) => Math.min(run(p), run(p), run(p));
  const empty = best(p0);
  const sixteen = best(p16);
  console.log(`recorder ${recording ? 'on ' : 'off'}: empty pipeline ${empty.toFixed(1)} ns/request, ` +
    `16 idle steps ${sixteen.toFixed(1)} ns/request → ${((sixteen - empty) / 16).toFixed(1)} ns per idle step`);
}
