// PipelineRouting: which pipeline's slot a request gets. One pipeline routes nothing; with several,
// the connection's identity (app_name, user, client) settles its candidates once, and a request
// picks among them by command, db and collection (a bounded memo in front of the ordered scan).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PipelineManager, PipelineRouting, MEMO_LIMIT, MEMO_BUDGET, type RouteEntry } from '../../runtime/pipeline/index.ts';
import type { MatchSpec } from '../../runtime/config/index.ts';

const manager = new PipelineManager();
const entry = (id: string, match: MatchSpec = {}): RouteEntry => ({ id, match, slot: manager.slot(id) });

test('one pipeline: `single` is its slot, the one every connection holds', () => {
  const r = new PipelineRouting([entry('default')]);
  assert.equal(r.single, manager.slot('default'));
  assert.equal(PipelineRouting.single(manager.slot('x')).single, manager.slot('x'));
});

test('connection-level matches settle a fixed route: no request is looked at', () => {
  const r = new PipelineRouting([
    entry('reports', { app_name: 'reports-*' }),
    entry('admins', { user: ['alice', 'bob'] }),
    entry('office', { client: '10.0.0.0/8' }),
    entry('default'),
  ]);
  assert.equal(r.single, null);
  assert.equal(r.forConnection('reports-1', '', '127.0.0.1').fixed, manager.slot('reports'));
  assert.equal(r.forConnection('app', 'bob', '127.0.0.1').fixed, manager.slot('admins'));
  assert.equal(r.forConnection('app', '', '::ffff:10.9.8.7').fixed, manager.slot('office'));
  assert.equal(r.forConnection('app', '', '192.168.1.1').fixed, manager.slot('default'));
  assert.equal(r.forConnection('app', '', '192.168.1.1').pick('find', 'x', 'y'), manager.slot('default'));
  // Connections with the same candidates share one route (and its memo).
  assert.equal(r.forConnection('reports-1', '', '127.0.0.1'), r.forConnection('reports-2', 'carol', '127.0.0.2'));
});

test('request-level matches: the first candidate the request satisfies, in order, else the default', () => {
  const r = new PipelineRouting([
    entry('writes', { command: ['insert', 'update'], collection: 'orders' }),
    entry('analytics', { db: 'analytics*' }),
    entry('reports', { app_name: 'reports-*' }),
    entry('archive', { collection: '*_archive' }),
    entry('default'),
  ]);
  const app = r.forConnection('shop', '', '127.0.0.1');
  assert.equal(app.fixed, null);
  assert.deepEqual(app.ids, ['writes', 'analytics', 'archive', 'default'], 'reports is out of reach for this appName');
  assert.equal(app.pick('insert', 'shop', 'orders'), manager.slot('writes'));
  assert.equal(app.pick('find', 'shop', 'orders'), manager.slot('default'));
  assert.equal(app.pick('insert', 'analytics_eu', 'orders'), manager.slot('writes'), 'first match wins');
  assert.equal(app.pick('find', 'analytics_eu', 'orders'), manager.slot('analytics'));
  assert.equal(app.pick('find', 'shop', 'orders_archive'), manager.slot('archive'));
  // Asked again: the memo answers the same.
  assert.equal(app.pick('find', 'analytics_eu', 'orders'), manager.slot('analytics'));
  assert.equal(app.pick('insert', 'shop', 'orders'), manager.slot('writes'));
  // A reports connection stops at "reports" (nothing of the request matters after it) unless an earlier one takes the request.
  const reports = r.forConnection('reports-x', '', '127.0.0.1');
  assert.deepEqual(reports.ids, ['writes', 'analytics', 'reports']);
  assert.equal(reports.pick('find', 'shop', 'orders_archive'), manager.slot('reports'));
  assert.equal(reports.pick('update', 'shop', 'orders'), manager.slot('writes'));
});

test('the memo is bounded: a client naming ever new collections is answered right past the bound', () => {
  const r = new PipelineRouting([entry('hot', { collection: 'hot_*' }), entry('default')]);
  const route = r.forConnection('', '', '127.0.0.1');
  for (let i = 0; i < MEMO_LIMIT + 500; i++) {
    assert.equal(route.pick('find', 'db', `c${i}`), manager.slot('default'));
  }
  assert.equal((route as unknown as { memoSize: number }).memoSize, MEMO_LIMIT);
  assert.equal(route.pick('find', 'db', 'hot_new'), manager.slot('hot'), 'past the bound the scan still answers');
});

test('the memos of all routes of a routing share one budget: many candidate sets cannot add up past it', () => {
  // 20 app_name pipelines testing a collection each: an appName reaching pipeline i makes its own route.
  const entries = Array.from({ length: 20 }, (_, i) => entry(`p${i}`, { app_name: `app${i}`, collection: `hot${i}_*` }));
  const r = new PipelineRouting([...entries, entry('default')]);
  let remembered = 0;
  for (let i = 0; i < 20; i++) {
    const route = r.forConnection(`app${i}`, '', '127.0.0.1');
    for (let c = 0; c < MEMO_LIMIT; c++) route.pick('find', 'db', `c${c}`);
    remembered += (route as unknown as { memoSize: number }).memoSize;
    assert.equal(route.pick('find', 'db', `hot${i}_x`), manager.slot(`p${i}`));
  }
  assert.equal(remembered, MEMO_BUDGET, `20 × ${MEMO_LIMIT} asked, the budget kept`);
});

test('match.command on a command mongod runs under two spellings takes either (findAndModify / findandmodify)', () => {
  const r = new PipelineRouting([entry('guarded', { command: 'findAndModify' }), entry('lower', { command: 'dbstats' }), entry('default')]);
  const c = r.forConnection('app', '', '127.0.0.1');
  assert.equal(c.pick('findAndModify', 'x', 'y'), manager.slot('guarded'));
  assert.equal(c.pick('findandmodify', 'x', 'y'), manager.slot('guarded'));
  assert.equal(c.pick('dbStats', 'x', ''), manager.slot('lower'));
  assert.equal(c.pick('find', 'x', 'y'), manager.slot('default'));
});
