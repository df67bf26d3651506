// Per-request contexts: the host's numbering (runtime/wasm/request-contexts.ts) and the SDK's
// RequestContext through a plugin (test/fixtures/plugins/reqctx): the response sees its own
// request's state, a request that ends without a response is ended at the connection's next
// request, contexts are bounded, and a trap drops them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestContexts } from '../../runtime/wasm/request-contexts.ts';
import type { HostExchange } from '../../runtime/wasm/index.ts';
import { PluginHarness } from '../../sdk/testing/index.ts';
import { fixture } from './fixtures.ts';

let serial = 0;
const exchange = (conn: number) => ({ conn: { id: conn }, serial: ++serial }) as unknown as HostExchange;

test('host: a context per open request, ended by the response or by the connection\'s next request', () => {
  const done: number[] = [];
  const c = new RequestContexts(8, (n) => done.push(n));
  const a1 = exchange(1);
  const b1 = exchange(2);
  const ka = c.open(a1);
  const kb = c.open(b1);
  assert.notEqual(ka, kb);
  assert.equal(c.open(a1), ka, 'the same request keeps its context');
  assert.equal(c.take(b1), kb);
  c.release(kb);
  assert.equal(c.take(b1), -1, 'taken once');
  const a2 = exchange(1);
  const ka2 = c.open(a2); // connection 1's next request ends a1's context
  assert.deepEqual(done, [ka]);
  assert.equal(c.take(a1), -1);
  assert.equal(c.take(a2), ka2);
  c.release(ka2);
  assert.equal(c.size, 0);
});

test('host: an exchange object its connection reuses for the next request is a new request (told by serial)', () => {
  const done: number[] = [];
  const c = new RequestContexts(8, (n) => done.push(n));
  const ex = exchange(1) as { serial: number };
  const k1 = c.open(ex as unknown as HostExchange);
  assert.equal(c.open(ex as unknown as HostExchange), k1, 'the same request keeps its context');
  ex.serial = ++serial; // the connection's next request, same object
  const k2 = c.open(ex as unknown as HostExchange);
  assert.deepEqual(done, [k1], 'the previous request\'s context was ended');
  assert.equal(c.take(ex as unknown as HostExchange), k2);
  c.release(k2);
  assert.equal(c.size, 0);
});

test('host: at most `max` open; one is ended to make room (round robin); numbers stay below max', () => {
  const done: number[] = [];
  const c = new RequestContexts(3, (n) => done.push(n));
  const ex = [1, 2, 3, 4, 5].map(exchange);
  const k = ex.map((e) => c.open(e));
  assert.ok(k.every((n) => n >= 0 && n < 3), String(k));
  assert.deepEqual(done, [k[0], k[1]]);
  assert.equal(c.size, 3);
  assert.equal(c.take(ex[0]!), -1);
  assert.equal(c.take(ex[4]!), k[4]);
});

const infos = (h: PluginHarness) => h.logs.filter((l) => l.level === 'info' && l.msg !== 'pipeline loaded').map((l) => l.msg);

test('SDK: the response sees its own request\'s context; onDone after it', async () => {
  const h = await PluginHarness.load(await fixture('reqctx'));
  h.roundTrip({ find: 'a' }, { ok: 1 }, { requestId: 7 });
  assert.deepEqual(infos(h), ['ctx rid=7 op=find for rid=7', 'done rid=7']);
});

test('SDK: interleaved connections keep their own contexts', async () => {
  const h = await PluginHarness.load(await fixture('reqctx'));
  const a = h.request({ find: 'a' }, { requestId: 1, conn: { id: 1 } });
  const b = h.request({ insert: 'b' }, { requestId: 2, conn: { id: 2 } });
  h.response(b.exchange, { ok: 1 });
  h.response(a.exchange, { ok: 1 });
  assert.deepEqual(infos(h), ['ctx rid=2 op=insert for rid=2', 'done rid=2', 'ctx rid=1 op=find for rid=1', 'done rid=1']);
});

test('SDK: a request that gets no response is ended at its connection\'s next request; the object is reused clean', async () => {
  const h = await PluginHarness.load(await fixture('reqctx'));
  h.request({ insert: 'a' }, { requestId: 1 }); // e.g. rejected by a later step, or no reply due
  const second = h.request({ find: 'a' }, { requestId: 2 });
  h.response(second.exchange, { ok: 1 });
  assert.deepEqual(infos(h), ['done rid=1', 'ctx rid=2 op=find for rid=2', 'done rid=2']);
  assert.equal(h.logs.filter((l) => l.level === 'warn').length, 0, 'reused context cleared by onDone');
});

test('SDK: a local reply runs the response phase with the context; a step without a request phase run gets none', async () => {
  const h = await PluginHarness.load(await fixture('reqctx'));
  const r = h.roundTrip({ local: 1 }, { ok: 1 }, { requestId: 3 });
  assert.deepEqual(r.newReply ?? r.localReply, { ok: 1 });
  const orphan = h.request({ find: 'x' }, { requestId: 4, conn: { id: 9 } });
  h.request({ find: 'x' }, { requestId: 5, conn: { id: 9 } }); // ends rid 4
  h.response(orphan.exchange, { ok: 1 });
  assert.deepEqual(infos(h), ['ctx rid=3 op=local for rid=3', 'done rid=3', 'done rid=4', 'no ctx rid=4']);
});

test('SDK: a trap drops the contexts with the instance', async () => {
  const h = await PluginHarness.load(await fixture('reqctx'), { on_error: 'open' });
  const a = h.request({ find: 'a' }, { requestId: 1, conn: { id: 1 } });
  h.request({ trap: 1 }, { requestId: 2, conn: { id: 2 } });
  assert.equal(h.records.filter((r) => r.error).length, 1);
  h.response(a.exchange, { ok: 1 });
  assert.deepEqual(infos(h), ['no ctx rid=1']);
});

test('host: connections without an open context are swept, so the table follows the open contexts', () => {
  const c = new RequestContexts(1000, () => {});
  for (let i = 0; i < 10_000; i++) {
    const ex = exchange(i); // a connection per request, each answered
    c.release(c.take(ex) === -1 ? c.open(ex) : -1);
  }
  assert.equal(c.size, 0);
  const table = (c as unknown as { byConn: Map<number, number> }).byConn;
  assert.ok(table.size <= 65, `${table.size} entries`);
});
