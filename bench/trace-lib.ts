// What bench/trace-decision.ts, bench/trace-batch.ts and bench/idle-step.ts share: a graph of
// request-phase steps that do nothing (the test plugin `continue`, built on first use), and one request traced
// the way a client connection traces it (its timings reset, the request phase run timed, then
// Tracing.record with what the connection would hand over).
import { performance } from 'node:perf_hooks';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { PipelineManager, RequestTimings, type PipelineConfig, type Pipeline, type StepRecorder } from '../runtime/pipeline/index.ts';
import type { Tracing } from '../runtime/telemetry/index.ts';
import { makeExchange } from '../sdk/testing/index.ts';

export const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };
export const STEPS = 8;
export const command = { find: 'users', filter: { a: 1 }, $db: 'app' };

const ROOT = new URL('..', import.meta.url).pathname;
const PLUGIN = `${ROOT}build/test-plugins/continue.wasm`;

/** A graph of `steps` idle steps, timed by `recorder` when given (the untimed loop otherwise). */
export async function idleGraph(recorder?: StepRecorder, steps = STEPS): Promise<Pipeline> {
  if (!existsSync(PLUGIN)) spawnSync(process.execPath, [`${ROOT}scripts/build-plugins.mjs`, '--fixtures'], { cwd: ROOT, stdio: 'inherit' });
  const m = new PipelineManager({ recorder, logger: quiet });
  const names = Array.from({ length: steps }, (_, i) => `idle${i}`);
  const cfg: PipelineConfig = { pipeline: { id: 'bench', request: names, response: [] }, steps: {} };
  for (const n of names) cfg.steps[n] = { module: PLUGIN, config: {}, max_memory_pages: 16 };
  await m.load(cfg);
  return m.get('bench');
}

const timings = new RequestTimings();
const reply = { failed: false, errorCode: 0, errorName: '' };

/** One sampled request through `p`, recorded by `t` (`readAt`: when it was read). */
export function tracedRequest(t: Tracing, p: Pipeline, readAt = performance.now()): void {
  const ex = makeExchange(command, 'bench');
  timings.reset();
  ex.timings = timings;
  const requestPhaseAt = performance.now();
  p.runRequest(ex);
  t.record({
    parent: null, pipelineId: 'bench', variant: 'baseline', op: 'find', db: 'app', collection: 'users',
    readAt, endAt: performance.now(), requestPhaseAt, responsePhaseAt: -1,
    upstreamStartedAt: 0, upstreamAcquiredAt: 0, upstreamWrittenAt: 0, upstreamRepliedAt: 0, upstream: '',
    ok: true, errorCode: 0, errorName: '', reply, timings,
  });
}

/** One request through `p`, untraced. */
export function plainRequest(p: Pipeline): void {
  p.runRequest(makeExchange(command, 'bench'));
}
