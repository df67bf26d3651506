import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PluginHarness, Verdict } from '../../sdk/testing/index.ts';
import { fixture } from './fixtures.ts';

test('continue: an idle step leaves the exchange untouched and is timed as wasm:<name>', async () => {
  const h = await PluginHarness.load(await fixture('continue'));
  const r = h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { ok: 1 });
  assert.equal(r.verdict, Verdict.Continue);
  assert.equal(r.newRequest, null);
  assert.equal(r.newReply, null);
  assert.deepEqual(h.records.map((x) => [x.step, x.phase, x.error]), [['wasm:continue', 0, false], ['wasm:continue', 1, false]]);
  assert.ok(h.records.every((x) => x.durationNs > 0));
});

test('properties are readable by the plugin', async () => {
  const h = await PluginHarness.load(await fixture('props'), { pipelineId: 'blue' });
  h.request({ find: 'users', filter: {}, $db: 'app' }, { conn: { id: 7, appName: 'shop', clientAddress: '10.0.0.1:4000', user: 'ann' }, requestId: 42 });
  const line = h.logs.find((l) => l.msg.startsWith('op='));
  assert.ok(line, 'plugin logged');
  assert.match(line.msg, /^op=find db=app coll=users app=shop addr=10\.0\.0\.1:4000 user=ann pipeline=blue rid=42 conn=7 size=\d+$/);
  assert.equal(line.level, 'info');
  assert.equal(line.fields.step, 'wasm:props');
});

test('reject: verdict, code, codeName and message reach the exchange', async () => {
  const h = await PluginHarness.load(await fixture('props'));
  const r = h.request({ drop: 'users', $db: 'app' });
  assert.equal(r.verdict, Verdict.Reject);
  assert.deepEqual(r.reject, { code: 13, codeName: 'Unauthorized', message: 'drop is not allowed on app' });
});

test('local reply: skips the upstream; the response phase runs over the local reply', async () => {
  const h = await PluginHarness.load(await fixture('props'));
  const r = h.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  assert.equal(r.verdict, Verdict.LocalReply);
  assert.deepEqual(r.localReply, { ok: 1, local: true });
  const replyLine = h.logs.find((l) => l.msg.startsWith('reply size='));
  assert.match(replyLine?.msg ?? '', /^reply size=25 local=1 ok=1 code=0 elapsed=yes needle=-1 op=ping flags=\d+$/);
});

test('route and body replacement', async () => {
  const h = await PluginHarness.load(await fixture('props'));
  const r = h.request({ stripLast: 'c', x: 1, $db: 'archive' });
  assert.equal(r.route, 'mongodb://archive:27017');
  assert.deepEqual(r.newRequest, { stripLast: 'c', x: 1, $db: 'archive' });
});

test('the body a plugin reads has document sequences folded in', async () => {
  const h = await PluginHarness.load(await fixture('props'));
  const plain = h.request({ insert: 'c', $db: 'app' });
  const withSeq = h.request({ insert: 'c', $db: 'app' }, { sequences: [{ id: 'documents', docs: [{ a: 1 }, { b: 2 }] }] });
  const sizes = h.logs.filter((l) => l.msg.startsWith('op=insert')).map((l) => Number(/size=(\d+)/.exec(l.msg)![1]));
  assert.equal(sizes.length, 2);
  assert.ok(sizes[1]! > sizes[0]!, `folded ${sizes[1]} > plain ${sizes[0]}`);
  assert.equal(plain.verdict, Verdict.Continue);
  assert.equal(withSeq.verdict, Verdict.Continue);
});

test('replace body from kv: a host-stored document replaces the command', async () => {
  const h = await PluginHarness.load(await fixture('echo_body'));
  const { serialize } = await import('bson');
  h.kv.set('next', serialize({ find: 'other', $db: 'x' }), 0);
  const r = h.request({ find: 'users', $db: 'app' });
  assert.deepEqual(r.newRequest, { find: 'other', $db: 'x' });
  h.kv.delete('next');
});

test('refused config: load throws a clear error', async () => {
  await assert.rejects(PluginHarness.load(await fixture('props'), { config: { refuse: true } }), /wasm:props refused its config/);
});

test('numeric properties: reply ok/code peeked by the host, elapsed time; body search without a copy', async () => {
  const h = await PluginHarness.load(await fixture('props'));
  h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { ok: 0, errmsg: 'no', code: 11600, codeName: 'InterruptedAtShutdown' });
  h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { ok: 1, cursor: { id: 0, ns: 'app.users', firstBatch: [{ _id: 1, needle: 'x' }] } });
  h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { ok: true, n: 1 });
  const lines = h.logs.filter((l) => l.msg.startsWith('reply size=')).map((l) => l.msg);
  assert.match(lines[0]!, / ok=0 code=11600 elapsed=yes needle=-1 /);
  const found = / ok=1 code=0 elapsed=yes needle=(\d+) /.exec(lines[1]!);
  assert.ok(found !== null && Number(found[1]) > 20, lines[1]);
  assert.match(lines[2]!, / ok=1 code=0 /, 'ok: true counts as ok');
});

test('same-namespace flags: strings are kept only while op / db / collection repeat', async () => {
  const h = await PluginHarness.load(await fixture('props'));
  const seen = () => h.logs.filter((l) => l.msg.startsWith('op=')).map((l) => l.msg.split(' ').slice(0, 3).join(' '));
  h.request({ find: 'a', filter: {}, $db: 'one' });
  h.request({ find: 'a', filter: {}, $db: 'one' });
  h.request({ insert: 'b', documents: [], $db: 'two' });
  h.request({ find: 'a', filter: {}, $db: 'one' });
  assert.deepEqual(seen(), ['op=find db=one coll=a', 'op=find db=one coll=a', 'op=insert db=two coll=b', 'op=find db=one coll=a']);
  // the response phase of a repeated namespace gets SameOp|SameDb|SameCollection (8|16|32)
  h.roundTrip({ find: 'a', filter: {}, $db: 'one' }, { ok: 1 });
  const flags = Number(/flags=(\d+)$/.exec(h.logs.filter((l) => l.msg.startsWith('reply size=')).at(-1)!.msg)![1]);
  assert.equal(flags & 56, 56);
});

test('structured log records: escaped, written as fields; a record with a raw newline is demoted to a message', async () => {
  const h = await PluginHarness.load(await fixture('props'));
  h.request({ record: 1, $db: 'app' });
  const rec = h.logs.find((l) => l.fields.quote !== undefined);
  assert.ok(rec, 'record logged');
  assert.equal(rec.level, 'warn');
  assert.equal(rec.fields.quote, 'say "hi"\\ and\nnew line\ttab');
  assert.equal(rec.fields.unicode, 'héllo € 😀');
  assert.equal(rec.fields.ctl, '\u0001');
  assert.equal(rec.fields.neg, -42);
  assert.ok(rec.msg.includes('"big":9007199254740993'), 'i64 digits written exactly (beyond 2^53)');
  assert.equal(rec.fields.half, 0.5);
  assert.equal(rec.fields.nan, null);
  assert.equal(rec.fields.yes, true);
  assert.equal(rec.fields.step, 'wasm:props');
  h.request({ badRecord: 1, $db: 'app' });
  const demoted = h.logs.find((l) => l.msg.includes('injected'));
  assert.ok(demoted, 'logged as a plain message');
  assert.equal(demoted.fields.injected, undefined);
  assert.equal(demoted.fields.step, 'wasm:props');
});
