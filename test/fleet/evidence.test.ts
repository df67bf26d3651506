// Fleet evidence (runtime/fleet/evidence.ts): windows read from several instances are merged
// losslessly — the merged latency histogram is exactly the one a single process recording every
// request would have — each instance's window is its own (one joining late or restarting never
// makes a window negative), and the instances that cannot be read are named, with the quorum; the
// custom metrics and shadow canary figures of every instance merge by their own rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArmEvidence } from '../../runtime/canary/arm-evidence.ts';
import { emptyHistogram, jsCopy } from '../../runtime/canary/windows.ts';
import { FleetEvidence, encodeArm, type EvidenceReader } from '../../runtime/fleet/evidence.ts';
import type { CustomPair } from '../../runtime/fleet/custom-evidence.ts';
import { encodeShadow, type EncodedShadow } from '../../runtime/fleet/shadow-evidence.ts';
import type { CustomReading } from '../../runtime/canary/windows.ts';
import type { DiffRecord, ShadowFigures } from '../../runtime/canary/shadow.ts';
import type { InstanceInfo } from '../../runtime/fleet/store.ts';

const info = (id: string): InstanceInfo => ({ instance_id: id, address: '', control_url: null, version: '', workers: 1, graph_generation: 0,
  started_at: '' });

function setup(ids: string[], down = new Set<string>()) {
  const arms = new Map(ids.map((id) => [id, { baseline: new ArmEvidence(), candidate: new ArmEvidence() }]));
  const read: EvidenceReader = async (i, pipelineId) => {
    if (down.has(i.instance_id)) throw new Error('connect ECONNREFUSED');
    const a = arms.get(i.instance_id)!;
    return { instance_id: i.instance_id, pipeline_id: pipelineId, at: '', arms: { baseline: encodeArm(a.baseline), candidate: encodeArm(a.candidate) } };
  };
  const infos = ids.map(info);
  const ev = new FleetEvidence({ instances: async () => infos, read, quorumPct: 50 });
  return { arms, ev, down, infos };
}

test('windows of several instances merge losslessly: counts summed, the histogram exactly that of every request', async () => {
  const { arms, ev } = setup(['a', 'b', 'c']);
  const all = emptyHistogram();
  let n = 0;
  for (const [k, a] of arms) {
    for (let i = 0; i < 2000; i++) {
      const ms = k === 'a' ? 0.2 + (i % 50) / 100 : k === 'b' ? 3 + (i % 700) / 10 : 150 + i;
      a.candidate.record(ms, i % 10 !== 0);
      all.recordValue(Math.round(ms * 1000));
      n++;
    }
  }
  const w = await ev.windows('c1', 'default');
  assert.equal(w.candidate.requests, n);
  assert.equal(w.candidate.errors, n / 10);
  const want = jsCopy(all);
  for (const p of [50, 90, 95, 99, 99.9]) assert.equal(w.candidate.percentileMs(p), want.getValueAtPercentile(p) / 1000, `p${p}`);
  assert.deepEqual(w.evidence, { instances_read: ['a', 'b', 'c'], unreadable: [], quorum: true });
  // The next window holds only what came after.
  arms.get('b')!.candidate.record(5, true);
  const next = await ev.windows('c1', 'default');
  assert.equal(next.candidate.requests, 1);
  const five = emptyHistogram();
  five.recordValue(5000);
  assert.equal(next.candidate.percentileMs(50), five.getValueAtPercentile(50) / 1000);
});

test('an instance that cannot be read is named; below the quorum the window does not decide; a restarted instance counts afresh', async () => {
  const { arms, ev, down, infos } = setup(['a', 'b', 'c']);
  for (const a of arms.values()) a.baseline.record(1, true);
  await ev.windows('c1', 'default');
  down.add('c');
  const w = await ev.windows('c1', 'default');
  assert.deepEqual(w.evidence.unreadable, [{ instance_id: 'c', error: 'connect ECONNREFUSED' }]);
  assert.equal(w.evidence.quorum, true, '2 of 3 is at least 50 %');
  down.add('b');
  const thin = await ev.windows('c1', 'default');
  assert.deepEqual(thin.evidence.instances_read, ['a']);
  assert.equal(thin.evidence.quorum, false, '1 of 3 is below 50 %');
  down.clear();
  // b restarted (a new started_at in the registry): its counts start again from zero — here already
  // above what it had before the restart — and its window is everything it has now.
  const fresh = new ArmEvidence();
  fresh.record(2, true);
  fresh.record(2, true);
  arms.get('b')!.baseline = fresh;
  infos[1] = { ...infos[1], started_at: 'later' };
  const after = await ev.windows('c1', 'default');
  assert.equal(after.baseline.requests, 2);
});

test('custom metrics merge across instances: counters per request of the fleet, histograms the fleet\'s mean, gauges summed; an instance\'s first ' +
  'reading only starts its window, and a counter that went down counts afresh', async () => {
  const ids = ['a', 'b', 'c'];
  const arms = new Map(ids.map((id) => [id, { baseline: new ArmEvidence(), candidate: new ArmEvidence() }]));
  const readings = new Map<string, Record<string, CustomPair>>();
  const asked: string[][] = [];
  const read: EvidenceReader = async (i, pipelineId, custom = []) => {
    asked.push([...custom]);
    const a = arms.get(i.instance_id)!;
    return { instance_id: i.instance_id, pipeline_id: pipelineId, at: '', arms: { baseline: encodeArm(a.baseline), candidate: encodeArm(a.candidate) },
      custom: readings.get(i.instance_id) };
  };
  const ev = new FleetEvidence({ instances: async () => ids.map(info), read, quorumPct: 50 });
  const want = { custom: ['proxy_plugin_c', 'proxy_plugin_h', 'proxy_plugin_g'], maxDiffs: null };
  const counter = (value: number): CustomReading => ({ kind: 'counter', value, sum: 0, count: 0 });
  const hist = (sum: number, count: number): CustomReading => ({ kind: 'histogram', value: 0, sum, count });
  const gauge = (value: number): CustomReading => ({ kind: 'gauge', value, sum: 0, count: 0 });
  const serve = (id: string, b: number, c: number) => {
    for (let k = 0; k < b; k++) arms.get(id)!.baseline.record(1, true);
    for (let k = 0; k < c; k++) arms.get(id)!.candidate.record(1, true);
  };
  // Before the first window: cumulative readings from before the canary (they must not count).
  for (const id of ids) {
    readings.set(id, { proxy_plugin_c: { baseline: counter(1000), candidate: counter(0) }, proxy_plugin_h: { baseline: hist(500, 50), candidate: null },
      proxy_plugin_g: { baseline: gauge(1), candidate: gauge(2) } });
  }
  const first = await ev.windows('c1', 'default', want);
  assert.deepEqual(asked.at(-1), want.custom, 'the instances are asked for the rules\' metrics');
  assert.ok(Number.isNaN(first.custom!.get('proxy_plugin_c')!.baseline), 'a first reading only starts the window');
  assert.deepEqual(first.custom!.get('proxy_plugin_g'), { baseline: 3, candidate: 6 }, 'gauges: the instances\' values summed');
  // One window: a and b serve; a's counter goes 1 per request on the baseline, 2 on the candidate; b's 3 and 0; c serves nothing.
  serve('a', 10, 5);
  serve('b', 30, 15);
  readings.set('a', { proxy_plugin_c: { baseline: counter(1010), candidate: counter(10) }, proxy_plugin_h: { baseline: hist(600, 60), candidate: hist(40, 4) },
    proxy_plugin_g: { baseline: gauge(1), candidate: gauge(2) } });
  readings.set('b', { proxy_plugin_c: { baseline: counter(1090), candidate: counter(0) }, proxy_plugin_h: { baseline: hist(800, 70), candidate: null },
    proxy_plugin_g: { baseline: gauge(5), candidate: gauge(2) } });
  const w = await ev.windows('c1', 'default', want);
  assert.deepEqual(w.custom!.get('proxy_plugin_c'), { baseline: (10 + 90) / 40, candidate: 10 / 20 });
  // a: +100 over 10 observations; b: +300 over 20: the fleet's mean is 400 / 30 (not the mean of the means, 15).
  assert.equal(w.custom!.get('proxy_plugin_h')!.baseline, 400 / 30);
  // The candidate's histogram: a's first reading of it only starts its window.
  assert.ok(Number.isNaN(w.custom!.get('proxy_plugin_h')!.candidate));
  assert.deepEqual(w.custom!.get('proxy_plugin_g'), { baseline: 1 + 5 + 1, candidate: 6 });
  // b restarted its plugin: its counter starts again from 0 (now 20 after 10 requests).
  serve('b', 10, 0);
  readings.set('b', { ...readings.get('b')!, proxy_plugin_c: { baseline: counter(20), candidate: counter(0) } });
  const after = await ev.windows('c1', 'default', want);
  assert.equal(after.custom!.get('proxy_plugin_c')!.baseline, 2);
});

test('shadow canaries merge across instances: window counts by kind and step-time histograms added, the cumulative figures and the newest diffs ' +
  '(max_diffs of them, each naming its instance); figures of another canary are left out', async () => {
  const ids = ['a', 'b', 'c'];
  const shadows = new Map<string, EncodedShadow | null>();
  const read: EvidenceReader = async (i, pipelineId) => ({ instance_id: i.instance_id, pipeline_id: pipelineId, at: '', arms: { baseline: null,
    candidate: null }, shadow: shadows.get(i.instance_id) ?? null });
  const ev = new FleetEvidence({ instances: async () => ids.map(info), read, quorumPct: 50 });
  const fig = (sampled: number, kinds: [number, number, number], stepMs: number, diffsAt: number[]): ShadowFigures => {
    const evidence = { baseline: new ArmEvidence(), candidate: new ArmEvidence() };
    for (let k = 0; k < sampled; k++) {
      evidence.baseline.record(0.5, true);
      evidence.candidate.record(stepMs, true);
    }
    const diffs: DiffRecord[] = diffsAt.map((at) => ({ at, kind: 'reply', op: 'find', db: 'app', collection: 'items', baseline: 'reply', candidate: 'reply',
      paths: [{ path: 'cursor.firstBatch.0.ssn', change: 'removed' }], truncated: false, reply: null, bytes: 200 }));
    return { sampled, diverged: kinds[0] + kinds[1] + kinds[2], byKind: { outcome: kinds[0], request: kinds[1], reply: kinds[2] }, evidence,
      memoryBytes: 200 * diffs.length, reads: 0, readsInFlight: 0, diffs: () => [...diffs].reverse() };
  };
  const want = { custom: [], maxDiffs: 3 };
  shadows.set('a', encodeShadow('c1', fig(10, [1, 0, 2], 2, [1, 2, 3])));
  shadows.set('b', encodeShadow('c1', fig(20, [0, 1, 4], 4, [4, 5])));
  // c has not applied c1 yet: it still serves its previous shadow canary's figures.
  shadows.set('c', encodeShadow('c0', fig(1000, [0, 0, 1000], 9, [6])));
  const w = await ev.windows('c1', 'default', want);
  assert.equal(w.shadow!.window.sampled, 30);
  assert.equal(w.shadow!.window.diverged, 8);
  assert.deepEqual(w.shadow!.window.byKind, { outcome: 1, request: 1, reply: 6 });
  assert.equal(w.shadow!.window.candidate.requests, 30);
  const want2 = emptyHistogram();
  want2.recordValueWithCount(2000, 10);
  want2.recordValueWithCount(4000, 20);
  for (const p of [10, 50, 95]) assert.equal(w.shadow!.window.candidate.percentileMs(p), want2.getValueAtPercentile(p) / 1000, `p${p}`);
  const f = w.shadow!.figures;
  assert.deepEqual([f.sampled, f.diverged, f.memoryBytes], [30, 8, 1000]);
  assert.deepEqual(f.diffs().map((d) => [d.at, d.instance_id]), [[5, 'b'], [4, 'b'], [3, 'a']], 'the newest max_diffs, from every instance');
  // The next window: c has applied c1 (its figures start from zero), a shadowed 5 more with one divergence.
  shadows.set('a', encodeShadow('c1', fig(15, [1, 0, 3], 2, [1, 2, 3, 7])));
  shadows.set('c', encodeShadow('c1', fig(4, [0, 0, 0], 2, [])));
  const next = await ev.windows('c1', 'default', want);
  assert.deepEqual([next.shadow!.window.sampled, next.shadow!.window.diverged], [9, 1]);
  assert.equal(next.shadow!.figures.sampled, 39);
  assert.deepEqual(next.shadow!.figures.diffs().map((d) => [d.at, d.instance_id]), [[7, 'a'], [5, 'b'], [4, 'b']]);
  // What a status read merges: the same cumulative figures, without moving the evaluator's windows.
  const read1 = await ev.shadow('c1', 'default', 3);
  assert.equal(read1!.sampled, 39);
  assert.equal(await ev.shadow('c9', 'default', 3), null, 'no instance holds figures of c9');
  assert.equal((await ev.windows('c1', 'default', want)).shadow!.window.sampled, 0);
});
