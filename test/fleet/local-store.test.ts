// The embedded fleet store (SQLite, one instance): compare-and-set on revisions in the canary
// database, in-process watches, always the leader, a registry of itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CanaryStore } from '../../runtime/canary/store.ts';
import { LocalFleetStore } from '../../runtime/fleet/local.ts';

test('the embedded store: revisions, conflicts (also on a prefix changed since), pins, watches, leadership and registry of one instance; ' +
  'state survives a reopen', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fleet-local-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const db = new CanaryStore(dir);
  const s = new LocalFleetStore(db, 'solo');
  await s.start();
  const seen: unknown[] = [];
  s.watch('canaries/', (e) => seen.push(e.value));
  const a = await s.cas('canaries/x', { n: 1 }, 0, { fenced: true });
  assert.ok(a.ok);
  assert.deepEqual(await s.cas('canaries/x', { n: 2 }, 0), { ok: false, reason: 'conflict', revision: a.revision });
  const b = await s.cas('canaries/x', { n: 2 }, a.revision, { also: [{ key: 'history/x/1', value: 'h' }] });
  assert.ok(b.ok && b.revision > a.revision);
  assert.deepEqual(seen, [{ n: 1 }, { n: 2 }]);
  assert.deepEqual((await s.list('history/')).map((e) => e.value), ['h']);
  // A write refused when anything under a prefix changed after the revision given; keys with revisions; pins.
  const art = await s.cas('artifacts/h', 'bytes', 0);
  assert.ok(art.ok);
  assert.deepEqual(await s.revisions('artifacts/'), [{ key: 'artifacts/h', revision: art.revision }]);
  assert.equal((await s.cas('artifacts/h', null, art.revision, { unchanged: { prefix: 'canaries/', revision: a.revision } })).ok, false);
  assert.equal((await s.cas('artifacts/h', null, art.revision, { unchanged: { prefix: 'canaries/', revision: b.revision } })).ok, true);
  await s.pin('pins/h/solo-1', 60);
  assert.deepEqual((await s.revisions('pins/')).map((x) => x.key), ['pins/h/solo-1']);
  await s.unpin('pins/h/solo-1');
  assert.deepEqual(await s.revisions('pins/'), []);
  assert.equal(s.leader(), 'solo');
  assert.equal(s.isLeader(), true);
  await s.register({ instance_id: 'solo', address: 'x', control_url: null, version: '1', workers: 1, graph_generation: 0, started_at: 'now' });
  assert.deepEqual((await s.instances()).map((i) => i.instance_id), ['solo']);
  db.close();
  const again = new LocalFleetStore(new CanaryStore(dir), 'solo');
  assert.deepEqual(await again.get('canaries/x'), { key: 'canaries/x', value: { n: 2 }, revision: b.revision });
});
