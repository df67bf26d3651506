// The evaluating instance's cost per evaluation in a fleet (docs/fleet.md): every check_interval
// the leader reads each registered instance's arms (GET /api/v1/fleet/evidence/{pipeline}: counts
// and the latency HDR histogram, V2 compressed, base64), decodes them, turns each into a window and
// merges the windows. This script runs `--instances` (default 10) real HTTP evidence servers on
// loopback, each serving the control plane's evidence payload of two arms that grow by
// `--per-step` requests (default 5,000 per arm, latencies spread over 50 µs .. 200 ms) before each
// of `--steps` (default 20) evaluation steps, and times each step of FleetEvidence.windows()
// (runtime/fleet/evidence.ts) with its real HTTP reader: the wall time of the whole step, and
// separately the decode + window + merge part alone (no HTTP). It prints the median and the worst
// step and the payload size per instance. Figures depend on the machine; run it on a quiet one.
// With `--shadow`, each instance also serves a shadow canary's figures (every request shadowed,
// both graphs' step-time histograms, a full ring of 100 diffs of which the evaluation asks for 5),
// and the step merges them too.
//
//   node --import tsx bench/fleet-evaluation.ts [--instances 10] [--steps 20] [--per-step 5000] [--shadow]
import { createServer, type Server } from 'node:http';
import { performance } from 'node:perf_hooks';
import { arg } from './lib.ts';
import { ArmEvidence } from '../runtime/canary/arm-evidence.ts';
import { FleetEvidence, encodeArm, httpEvidenceReader, type EvidencePayload } from '../runtime/fleet/evidence.ts';
import { encodeShadow } from '../runtime/fleet/shadow-evidence.ts';
import type { DiffRecord, ShadowFigures } from '../runtime/canary/shadow.ts';
import type { InstanceInfo } from '../runtime/fleet/store.ts';

const instances = Number(arg('--instances', '10'));
const steps = Number(arg('--steps', '20'));
const perStep = Number(arg('--per-step', '5000'));
const withShadow = process.argv.includes('--shadow');
const MAX_DIFFS = 100;
const want = { custom: [] as string[], maxDiffs: withShadow ? MAX_DIFFS : null };

interface Fake { info: InstanceInfo; server: Server; baseline: ArmEvidence; candidate: ArmEvidence; shadow: ShadowFigures; bytes: number }

/** A shadow canary's figures that grow with the arms: every request shadowed, one in ten diverging, a full ring of diffs. */
function shadowOf(f: Fake): ShadowFigures {
  const diffs: DiffRecord[] = Array.from({ length: MAX_DIFFS }, (_, i) => ({ at: i, kind: 'reply', op: 'find', db: 'app', collection: 'people',
    baseline: 'reply', candidate: 'reply', truncated: false, reply: null, bytes: 400,
    paths: [{ path: `cursor.firstBatch.${i}.email`, change: 'changed', baseline_type: 'string', candidate_type: 'string' }] }));
  return {
    get sampled() { return f.baseline.requests; },
    get diverged() { return Math.floor(f.baseline.requests / 10); },
    get byKind() { return { outcome: 0, request: 0, reply: Math.floor(f.baseline.requests / 10) }; },
    evidence: { baseline: f.baseline, candidate: f.candidate }, memoryBytes: 400 * MAX_DIFFS, reads: 0, readsInFlight: 0, diffs: () => diffs,
  };
}

function payload(f: Fake, diffs?: number): EvidencePayload {
  const p: EvidencePayload = { instance_id: f.info.instance_id, pipeline_id: 'default', at: new Date().toISOString(),
    arms: { baseline: encodeArm(f.baseline), candidate: encodeArm(f.candidate) } };
  if (withShadow) p.shadow = encodeShadow('c', f.shadow, diffs);
  return p;
}

/** A deterministic spread of latencies (ms): most fast, a long tail. */
function fill(arm: ArmEvidence, n: number, seed: number): void {
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const u = x / 2147483648;
    arm.record(0.05 + (u < 0.9 ? u * 2 : u ** 8 * 200), u > 0.001);
  }
}

async function fake(i: number): Promise<Fake> {
  const f = { baseline: new ArmEvidence(), candidate: new ArmEvidence(), bytes: 0 } as Fake;
  f.shadow = shadowOf(f);
  f.server = createServer((req, res) => {
    const diffs = new URL(req.url ?? '/', 'http://x').searchParams.get('diffs');
    const text = JSON.stringify(payload(f, diffs === null ? undefined : Number(diffs)));
    f.bytes = Buffer.byteLength(text);
    res.writeHead(200, { 'content-type': 'application/json' }).end(text);
  });
  await new Promise<void>((r) => f.server.listen(0, '127.0.0.1', r));
  const port = (f.server.address() as { port: number }).port;
  f.info = { instance_id: `i${i}`, address: '127.0.0.1:0', control_url: `http://127.0.0.1:${port}`, version: '0', workers: 1, graph_generation: 0,
    started_at: new Date().toISOString() };
  return f;
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

const fakes = await Promise.all(Array.from({ length: instances }, (_, i) => fake(i + 1)));
const list = fakes.map((f) => f.info);
const overHttp = new FleetEvidence({ instances: async () => list, read: httpEvidenceReader(() => null, 5000), quorumPct: 50 });
// The same payloads handed over in memory: what decoding, windowing and merging cost alone.
const payloads = new Map<string, EvidencePayload>();
const inMemory = new FleetEvidence({ instances: async () => list, read: async (i) => payloads.get(i.instance_id)!, quorumPct: 50 });
const wall: number[] = [];
const merge: number[] = [];
let requests = 0;
for (let s = 0; s < steps; s++) {
  for (const [i, f] of fakes.entries()) {
    fill(f.baseline, perStep, s * 7919 + i);
    fill(f.candidate, perStep, s * 104729 + i);
    payloads.set(f.info.instance_id, payload(f, 5));
  }
  let t = performance.now();
  const w = await overHttp.windows('c', 'default', want);
  wall.push(performance.now() - t);
  t = performance.now();
  await inMemory.windows('c', 'default', want);
  merge.push(performance.now() - t);
  requests = w.baseline.requests + w.candidate.requests;
}
for (const f of fakes) f.server.close();
const bytes = median(fakes.map((f) => f.bytes));
console.log(`fleet evaluation: ${instances} instances × ${steps} steps, ${perStep} requests per arm per instance per step ` +
  `(last window: ${requests} requests)${withShadow ? ', with a shadow canary' : ''}`);
console.log(`  whole step over HTTP   median ${median(wall).toFixed(2)} ms, worst ${Math.max(...wall).toFixed(2)} ms`);
console.log(`  decode+window+merge    median ${median(merge).toFixed(2)} ms, worst ${Math.max(...merge).toFixed(2)} ms`);
console.log(`  evidence payload       ${bytes} bytes per instance`);
