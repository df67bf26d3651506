// The aimed split on its own: a matched connection always gets the candidate; a session's draw is
// the same on every connection and depends only on its lsid and the canary; a sticky client only
// moves from the baseline to the candidate as the traffic rises; an aimed canary resumes aimed
// after a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize, UUID } from 'bson';
import { AimedSelector, sessionDraw, saltOf } from '../../runtime/canary/index.ts';
import { ClientMatch, PercentSelector, type Pipeline } from '../../runtime/pipeline/index.ts';
import { CommandPeek } from '../../runtime/wire/command-peek.ts';
import { initHistograms } from '../../runtime/profiling/index.ts';
import { harness, LOGGING_CANDIDATE } from './helpers.ts';

await initHistograms();

const B = { name: 'baseline' } as unknown as Pipeline;
const C = { name: 'candidate' } as unknown as Pipeline;
const conn = (id: number, appName = '', user = '', clientAddress = '127.0.0.1:5000') => ({ id, appName, user, clientAddress });

function command(lsid: UUID | null): { body: Buffer; lsidAt: number } {
  const body = Buffer.from(serialize(lsid === null ? { find: 'x', $db: 'app' } : { find: 'x', lsid: { id: lsid }, $db: 'app' }));
  return { body, lsidAt: new CommandPeek().read(body).lsidAt };
}

test('a matched connection is always on the candidate, at 0 %; an unmatched one never at 0 %', () => {
  const s = new AimedSelector(0, new ClientMatch({ app_name: 'reports-*' }), null, 1);
  const { body, lsidAt } = command(null);
  const reports = conn(1, 'reports-v2');
  const orders = conn(2, 'orders');
  for (let i = 0; i < 100; i++) {
    assert.equal(s.select(B, C, reports, body, lsidAt), C);
    assert.equal(s.select(B, C, orders, body, lsidAt), B);
  }
  // A connection whose login changes is matched again.
  const m = new AimedSelector(0, new ClientMatch({ user: 'ann' }), null, 1);
  const c = conn(3);
  assert.equal(m.select(B, C, c, body, lsidAt), B);
  c.user = 'ann';
  assert.equal(m.select(B, C, c, body, lsidAt), C);
});

test('session stickiness: the draw depends only on the lsid and the canary; as traffic rises a session only moves to the candidate', () => {
  const salt = saltOf('c-0123456789ab');
  const sessions = Array.from({ length: 400 }, () => command(new UUID()));
  const draws = sessions.map((x) => sessionDraw(x.body, x.lsidAt, salt));
  for (const d of draws) assert.ok(d >= 0 && d < 100);
  // Uniform enough: about half below 50.
  const below = draws.filter((d) => d < 50).length;
  assert.ok(below > 150 && below < 250, `${below} of 400 below 50`);
  // Another canary splits the same sessions differently.
  const other = sessions.map((x) => sessionDraw(x.body, x.lsidAt, saltOf('c-ba9876543210')));
  assert.ok(other.some((d, i) => (d < 50) !== (draws[i] < 50)));
  const s = new AimedSelector(10, null, 'session', salt, () => { throw new Error('no random draw for a request with an lsid'); });
  let onCandidate = new Set<number>();
  for (const pct of [10, 25, 50, 100]) {
    s.trafficPct = pct;
    const now = new Set<number>();
    sessions.forEach((x, i) => {
      // Two connections, same session: same answer.
      const a = s.select(B, C, conn(1), x.body, x.lsidAt);
      assert.equal(s.select(B, C, conn(2), x.body, x.lsidAt), a);
      if (a === C) now.add(i);
    });
    for (const i of onCandidate) assert.ok(now.has(i), `session ${i} went back to the baseline at ${pct} %`);
    onCandidate = now;
  }
  assert.equal(onCandidate.size, 400);
});

test('connection stickiness: one draw per connection, kept for its requests', () => {
  let n = 0;
  const s = new AimedSelector(50, null, 'connection', 1, () => (n++ % 2 === 0 ? 0.1 : 0.9));
  const { body, lsidAt } = command(new UUID());
  const a = conn(1);
  const b = conn(2);
  for (let i = 0; i < 20; i++) {
    assert.equal(s.select(B, C, a, body, lsidAt), C);
    assert.equal(s.select(B, C, b, body, lsidAt), B);
  }
});

test('an aimed, sticky canary resumes aimed after a restart; a plain one gets the plain split', async () => {
  const h = harness();
  const r = await h.controller.start({
    pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, auto_promote: false, rollback_rules: { check_interval: '1h' },
    match: { app_name: 'reports-*' }, sticky: 'session',
  }) as { canary_id: string; traffic_pct: number };
  assert.equal(r.traffic_pct, 0);
  assert.ok(h.manager.slot('default').selector instanceof AimedSelector);
  await h.controller.close();
  h.store.close();
  const h2 = harness({ dir: h.dir, clock: h.clock });
  await h2.controller.resume();
  const sel = h2.manager.slot('default').selector;
  assert.ok(sel instanceof AimedSelector, 'resumed with its aim');
  const { body, lsidAt } = command(null);
  assert.equal(sel.select(B, C, conn(1, 'reports-x'), body, lsidAt), C);
  assert.equal(sel.select(B, C, conn(2, 'orders'), body, lsidAt), B);
  h2.controller.rollback(r.canary_id, { reason: 'done' });
  await h2.controller.start({ pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, auto_promote: false, rollback_rules: { check_interval: '1h' } });
  assert.ok(h2.manager.slot('default').selector instanceof PercentSelector);
});
