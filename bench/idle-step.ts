// Idle step cost: the same request through 0 and 16 `continue` steps (a plugin whose onRequest
// does nothing), with the recorder off (untimed loop) and on (timed loop, timings gathered in a
// RequestTimings as the proxy does for each request). Rounds of the four cases are interleaved and
// the minimum of each is kept: the machine is shared.
// Run: node --import tsx bench/idle-step.ts [--rounds 7]
import { callbackRecorder, type StepRecorder } from '../runtime/pipeline/index.ts';
import { makeExchange } from '../sdk/testing/index.ts';
import { RequestTimings } from '../runtime/pipeline/request-timings.ts';
import { arg } from './lib.ts';
import { idleGraph } from './trace-lib.ts';

const ITER = 200_000;
const ROUNDS = Number(arg('--rounds', '7'));

async function pipeline(steps: number, recording: boolean) {
  let _sink = 0;
  const recorder: StepRecorder = callbackRecorder(recording, (_p, _s, _ph, ns) => { _sink += ns; });
  return idleGraph(recorder, steps);
}

function run(p: Awaited<ReturnType<typeof pipeline>>, timed: boolean): number {
  const ex = makeExchange({ find: 'users', filter: { a: 1 }, $db: 'app' }, 'bench');
  const timings = timed ? new RequestTimings() : null;
  ex.timings = timings;
  for (let i = 0; i < 20_000; i++) { ex.verdict = 0; timings?.reset(); p.runRequest(ex); }
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ITER; i++) { ex.verdict = 0; timings?.reset(); p.runRequest(ex); }
  return Number(process.hrtime.bigint() - t0) / ITER;
}

const cases = [];
for (const recording of [false, true]) {
  cases.push({ recording, p0: await pipeline(0, recording), p16: await pipeline(16, recording), empty: Infinity, sixteen: Infinity });
}
for (let r = 0; r < ROUNDS; r++) {
  for (const c of cases) {
    c.empty = Math.min(c.empty, run(c.p0, c.recording));
    c.sixteen = Math.min(c.sixteen, run(c.p16, c.recording));
  }
}
for (const c of cases) {
  console.log(`recorder ${c.recording ? 'on ' : 'off'}: empty pipeline ${c.empty.toFixed(1)} ns/request, ` +
    `16 idle steps ${c.sixteen.toFixed(1)} ns/request → ${((c.sixteen - c.empty) / 16).toFixed(1)} ns per idle step`);
}
