// Fleet evidence (runtime/fleet/evidence.ts): windows read from several instances are merged
// losslessly — the merged latency histogram is exactly the one a single process recording every
// request would have — each instance's window is its own (one joining late or restarting never
// makes a window negative), and the instances that cannot be read are named, with the quorum.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArmEvidence } from '../../runtime/canary/arm-evidence.ts';
import { emptyHistogram, jsCopy } from '../../runtime/canary/windows.ts';
import { FleetEvidence, encodeArm, type EvidenceReader } from '../../runtime/fleet/evidence.ts';
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
