// Plugins that lie to the host, written as WebAssembly text (no SDK would build them): spans
// outside their memory (a negative pointer or length, past the end, wrapping at 2^32), a command
// or reply that is not one BSON document or is larger than any command, host functions called
// from the start function, a start function or on_configure that traps, proxy_alloc answering a
// pointer outside memory. Each is a step error (counted, the request failed per on_error, the next
// request served) or, while loading, a refusal naming the step and the reason.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { PluginHarness, Verdict } from '../../sdk/testing/index.ts';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { spawnServe } from '../helpers/serve.ts';
import { watFiles } from '../helpers/wat.ts';
import { Registry } from 'prom-client';
import { PluginMetricRegistry } from '../../runtime/wasm/index.ts';
import { MAX_LABEL_NAME_LISTS, MAX_PLUGIN_METRICS } from '../../runtime/wasm/plugin-metrics.ts';
import { MetricKind } from '../../runtime/wasm/abi.ts';
import { MAX_DEFINITIONS_PER_INSTANCE } from '../../runtime/wasm/step-host.ts';

const ABI = '(global (export "proxy_abi_version") i32 (i32.const 4))';
const IMPORTS = `
  (import "proxy" "proxy_body_find" (func $find (param i32 i32 i32) (result i32)))
  (import "proxy" "proxy_get_body" (func $get_body (param i32 i32 i32) (result i32)))
  (import "proxy" "proxy_set_body" (func $set_body (param i32 i32 i32) (result i32)))
  (import "proxy" "proxy_reply_local" (func $reply_local (param i32 i32)))
  (import "proxy" "proxy_reject" (func $reject (param i32 i32 i32 i32 i32)))
  (import "proxy" "proxy_log" (func $log (param i32 i32 i32)))
  (import "proxy" "proxy_get_property" (func $get_property (param i32 i32 i32) (result i32)))
  (import "proxy" "proxy_kv_get" (func $kv_get (param i32 i32 i32 i32) (result i32)))
  (import "proxy" "proxy_kv_set" (func $kv_set (param i32 i32 i32 i32 i32) (result i32)))`;

/** A step that does `body` to requests naming "evil" (the bytes at 0) and nothing to others; `data` lies at 64. */
function liar(body: string, data = '', pages = 1): string {
  return `(module ${IMPORTS}
  (memory (export "memory") ${pages}) ${ABI}
  (data (i32.const 0) "evil") (data (i32.const 64) "${data}")
  (func (export "proxy_on_request") (param i32 i32 i32) (result i32)
    (if (i32.ge_s (call $find (i32.const 0) (i32.const 0) (i32.const 4)) (i32.const 0)) (then ${body}))
    (i32.const 0)))`;
}

const TRAPS: Record<string, [wat: string, error: RegExp]> = {
  set_body_negative_ptr: [liar('(drop (call $set_body (i32.const 0) (i32.const -100) (i32.const 100)))'),
    /passed proxy_set_body the span \[4294967196, 4294967196 \+ 100\) outside its memory \(65536 bytes\)/],
  set_body_past_end: [liar('(drop (call $set_body (i32.const 0) (i32.const 65530) (i32.const 100)))'), /proxy_set_body the span \[65530, 65530 \+ 100\)/],
  reply_local_negative_len: [liar('(call $reply_local (i32.const 64) (i32.const -1))'), /proxy_reply_local the span \[64, 64 \+ 4294967295\)/],
  get_body_past_end: [liar('(drop (call $get_body (i32.const 0) (i32.const 65530) (i32.const 1000)))'), /proxy_get_body the span \[65530, 65530 \+ \d+\)/],
  // 0xfffffff0 + 0x20 wraps to 16 in the plugin's own u32 arithmetic
  reject_wrapping: [liar('(call $reject (i32.const 2) (i32.const 0xfffffff0) (i32.const 0x20) (i32.const 64) (i32.const 0))'),
    /proxy_reject the span \[4294967280, 4294967280 \+ 32\)/],
  log_negative_len: [liar('(call $log (i32.const 2) (i32.const 64) (i32.const -2))'), /proxy_log the span \[64, 64 \+ 4294967294\)/],
  get_property_wrapping: [liar('(drop (call $get_property (i32.const 0) (i32.const -2) (i32.const 100)))'), /proxy_get_property the span \[4294967294, /],
  kv_set_value_past_end: [liar('(drop (call $kv_set (i32.const 64) (i32.const 2) (i32.const 65535) (i32.const 2) (i32.const 0)))'),
    /proxy_kv_set the span \[65535, 65535 \+ 2\)/],
  kv_get_key_negative: [liar('(drop (call $kv_get (i32.const -2) (i32.const 2) (i32.const 64) (i32.const 0)))'), /proxy_kv_get the span \[4294967294, /],
  kv_get_destination_past_end: [liar(`(drop (call $kv_set (i32.const 64) (i32.const 2) (i32.const 64) (i32.const 4) (i32.const 0)))
      (drop (call $kv_get (i32.const 64) (i32.const 2) (i32.const 65534) (i32.const 4)))`), /proxy_kv_get the destination 65534 .* outside its memory/],
  set_body_not_bson: [liar('(drop (call $set_body (i32.const 0) (i32.const 64) (i32.const 11)))', '\\ff\\00\\00\\00garbage'),
    /proxy_set_body: not a valid BSON document \(BSON document length 255 exceeds its container\)/],
  set_body_trailing_bytes: [liar('(drop (call $set_body (i32.const 0) (i32.const 64) (i32.const 6)))', '\\05\\00\\00\\00\\00\\01'),
    /proxy_set_body: 1 bytes after the BSON document/],
  set_body_empty: [liar('(drop (call $set_body (i32.const 0) (i32.const 64) (i32.const 0)))'), /proxy_set_body: not a valid BSON document \(truncated/],
  // A reply is checked by its length and terminator (as the upstream's are), a command whole.
  reply_local_too_long: [liar('(call $reply_local (i32.const 64) (i32.const 5))', '\\10\\00\\00\\00\\00'),
    /proxy_reply_local: not a valid BSON document \(BSON document length 16 exceeds its container\)/],
  set_body_bad_nested: [liar('(drop (call $set_body (i32.const 0) (i32.const 64) (i32.const 13)))', '\\0d\\00\\00\\00\\03a\\00\\10\\00\\00\\00\\00\\00'),
    /proxy_set_body: not a valid BSON document \(BSON document length 16 exceeds its container\)/],
  set_body_response_not_bson: [liar('(drop (call $set_body (i32.const 1) (i32.const 64) (i32.const 5)))', '\\05\\00\\00\\00\\01'),
    /proxy_set_body: not a valid BSON document \(BSON document is missing its terminating NUL\)/],
};

const LOAD: Record<string, [wat: string, error: RegExp]> = {
  start_reads_kv: [`(module ${IMPORTS} (memory (export "memory") 1) ${ABI}
    (func $start (drop (call $kv_get (i32.const 0) (i32.const 2) (i32.const 0) (i32.const 0)))) (start $start))`,
  /plugin wasm:start_reads_kv: its start function failed: .*called a host function that reads or writes its memory from its start function/],
  start_traps: [`(module (memory (export "memory") 1) ${ABI} (func $start unreachable) (start $start))`,
    /plugin wasm:start_traps: its start function failed: unreachable/],
  configure_traps: [`(module (memory (export "memory") 1) ${ABI}
    (func (export "proxy_alloc") (param i32) (result i32) (i32.const 1024))
    (func (export "proxy_on_configure") (param i32 i32) (result i32) unreachable))`,
  /plugin wasm:configure_traps refused its config: proxy_on_configure failed: unreachable/],
  memory64: [`(module (memory (export "memory") i64 1) ${ABI})`,
    /plugin wasm:memory64: uses WebAssembly features or instructions this host does not support: .*64-bit memories require memory64/],
  two_memories: [`(module (memory (export "memory") 1) (memory $second 1) ${ABI})`,
    /plugin wasm:two_memories: uses WebAssembly features or instructions this host does not support: .*multiple memories require multimemory/],
  alloc_outside: [`(module (memory (export "memory") 1) ${ABI}
    (func (export "proxy_alloc") (param i32) (result i32) (i32.const -1))
    (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 0)))`,
  /plugin wasm:alloc_outside refused its config: proxy_alloc\(2\) failed: .*the span \[4294967295, 4294967295 \+ 2\) outside its memory/],
};

const files = await watFiles({
  ...Object.fromEntries(Object.entries(TRAPS).map(([k, [wat]]) => [k, wat])),
  ...Object.fromEntries(Object.entries(LOAD).map(([k, [wat]]) => [k, wat])),
  // Grows its memory, then has the body copied into the new page: the host's view follows the growth.
  grows: liar(`(if (i32.lt_s (memory.grow (i32.const 1)) (i32.const 0)) (then unreachable))
    (drop (call $get_body (i32.const 0) (i32.const 70000) (i32.const 1000)))
    (drop (call $set_body (i32.const 0) (i32.const 70000) (i32.load (i32.const 70000))))`),
  // Logs its whole memory (two pages) as a message and most of it as a record.
  chatty: `(module (import "proxy" "proxy_log" (func $log (param i32 i32 i32))) (import "proxy" "proxy_log_fields" (func $fields (param i32 i32 i32)))
    (memory (export "memory") 2) ${ABI} (data (i32.const 64) "\\"k\\":1")
    (func (export "proxy_on_request") (param i32 i32 i32) (result i32)
      (call $log (i32.const 3) (i32.const 0) (i32.const 131072)) (call $fields (i32.const 3) (i32.const 64) (i32.const 100000)) (i32.const 0)))`,
  // Defines its counter on every request (not once in on_configure); traps if an id differs from the first.
  redefines: `(module (import "proxy" "proxy_define_metric" (func $define (param i32 i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 1) ${ABI} (global $first (mut i32) (i32.const -2))
    (data (i32.const 64) "p\\00r\\00o\\00x\\00y\\00_\\00p\\00l\\00u\\00g\\00i\\00n\\00_\\00x\\00")
    (func (export "proxy_on_request") (param i32 i32 i32) (result i32) (local $id i32)
      (local.set $id (call $define (i32.const 0) (i32.const 64) (i32.const 28) (i32.const 0) (i32.const 0)))
      (if (i32.lt_s (local.get $id) (i32.const 0)) (then unreachable))
      (if (i32.eq (global.get $first) (i32.const -2)) (then (global.set $first (local.get $id))))
      (if (i32.ne (global.get $first) (local.get $id)) (then unreachable))
      (i32.const 0)))`,
  // Defines proxy_plugin_y on every request with a new label name (l + three letters from a counter).
  relabels: `(module (import "proxy" "proxy_define_metric" (func $define (param i32 i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 1) ${ABI} (global $n (mut i32) (i32.const 0))
    (data (i32.const 64) "p\\00r\\00o\\00x\\00y\\00_\\00p\\00l\\00u\\00g\\00i\\00n\\00_\\00y\\00")
    (func $letter (param $at i32) (param $div i32)
      (i32.store16 (local.get $at) (i32.add (i32.const 97) (i32.rem_u (i32.div_u (global.get $n) (local.get $div)) (i32.const 26)))))
    (func (export "proxy_on_request") (param i32 i32 i32) (result i32)
      (i32.store16 (i32.const 128) (i32.const 108))
      (call $letter (i32.const 130) (i32.const 676)) (call $letter (i32.const 132) (i32.const 26)) (call $letter (i32.const 134) (i32.const 1))
      (global.set $n (i32.add (global.get $n) (i32.const 1)))
      (drop (call $define (i32.const 0) (i32.const 64) (i32.const 28) (i32.const 128) (i32.const 8)))
      (i32.const 0)))`,
  // One byte more than the largest command, in a memory large enough to hold it.
  oversize: liar('(drop (call $set_body (i32.const 0) (i32.const 0) (i32.const 16793601)))', '', 257),
} as Record<string, string>);
after(() => rmSync(dirname(files.grows!), { recursive: true, force: true }));

for (const [name, [, error]] of Object.entries(TRAPS)) {
  test(`a plugin that lies to the host (${name}) fails its step: counted, the client answered per on_error, the next request served`, async () => {
    const h = await PluginHarness.load(files[name]!, { on_error: 'closed', pipelineId: name });
    assert.equal(h.request({ find: 'fine' }).verdict, Verdict.Continue);
    const r = h.request({ find: 'evil' });
    assert.equal(r.verdict, Verdict.Reject);
    assert.deepEqual(r.reject, { code: 1, codeName: 'InternalError', message: `pipeline step wasm:${name} failed` });
    assert.equal(r.newRequest, null, 'nothing the plugin set is kept');
    assert.equal(r.exchange.newReply, null);
    assert.equal(r.exchange.localReply, null);
    const slot = h.pipeline.steps.get(name)!.slot;
    assert.match(slot.lastError, error);
    assert.ok(slot.lastError.startsWith(`plugin wasm:${name} `), slot.lastError);
    assert.match(await h.metrics(), new RegExp(`proxy_step_errors_total\\{pipeline_id="${name}",pipeline="baseline",step="wasm:${name}",phase="request"\\} 1`));
    assert.deepEqual(h.logs.filter((l) => l.level === 'error'), [], 'a step error is a warning');
    assert.equal(h.request({ find: 'fine' }).verdict, Verdict.Continue, 'rebuilt, serving');
  });
}

test('a plugin that grows its memory and has the body copied into the new pages gets it there', async () => {
  const h = await PluginHarness.load(files.grows!, { on_error: 'closed' });
  const r = h.request({ find: 'evil', filter: { a: 1 } });
  assert.equal(r.verdict, Verdict.Continue, h.pipeline.steps.get('grows')!.slot.lastError);
  assert.deepEqual(r.newRequest, { find: 'evil', filter: { a: 1 } });
});

test('a command or reply a plugin sets is at most 16 MiB + 16 KiB (the largest command mongod takes)', async () => {
  const h = await PluginHarness.load(files.oversize!, { on_error: 'open', max_memory_pages: 257 });
  const r = h.request({ find: 'evil' });
  assert.equal(r.verdict, Verdict.Continue, 'fails open');
  assert.equal(r.newRequest, null);
  assert.match(h.pipeline.steps.get('oversize')!.slot.lastError, /proxy_set_body: a document of 16793601 bytes, larger than the 16793600 a command or reply may be/);
});

test('a plugin\'s log line is at most 16 Ki characters (a message is cut, a record replaced): the log ring holds no plugin memory', async () => {
  const h = await PluginHarness.load(files.chatty!, { max_memory_pages: 2 });
  assert.equal(h.request({ find: 'a' }).verdict, Verdict.Continue);
  const lines = h.logs.filter((l) => l.level === 'warn');
  assert.equal(lines.length, 2, JSON.stringify(lines.map((l) => l.msg.slice(0, 80))));
  assert.equal(lines[0]!.msg.length, 16384 + '… (49152 more characters cut: a plugin\'s log line is at most 16384)'.length);
  assert.match(lines[0]!.msg, /… \(49152 more characters cut: a plugin's log line is at most 16384\)$/);
  assert.equal(lines[1]!.msg, 'a log record of 100000 bytes, over the 16384 a plugin\'s log line may be: not written');
  assert.equal(lines[1]!.fields.step, 'wasm:chatty');
});

test('a plugin that defines its metric on every request gets the same id each time (the host keeps one entry, not one per call)', async () => {
  const h = await PluginHarness.load(files.redefines!, { on_error: 'closed' });
  for (let i = 0; i < 1000; i++) assert.equal(h.request({ find: 'a' }).verdict, Verdict.Continue, h.pipeline.steps.get('redefines')!.slot.lastError);
  const host = (h.pipeline.steps.get('redefines')!.slot as unknown as { instance: { host: { metrics: unknown[] } } }).instance.host;
  assert.equal(host.metrics.length, 1);
});

test('a plugin that defines its metric with new label names per request: 8 lists per pipeline, each refusal logged once, ' +
  '1024 definitions an instance', async () => {
  const h = await PluginHarness.load(files.relabels!, { on_error: 'closed' });
  for (let i = 0; i < 1100; i++) assert.equal(h.request({ find: 'a' }).verdict, Verdict.Continue, h.pipeline.steps.get('relabels')!.slot.lastError);
  const host = (h.pipeline.steps.get('relabels')!.slot as unknown as { instance: { host: { metrics: unknown[]; definedIds: Map<string, number> } } })
    .instance.host;
  assert.equal(MAX_LABEL_NAME_LISTS, 8);
  assert.equal(host.metrics.length, MAX_LABEL_NAME_LISTS, 'an id for each list kept, none for the refused');
  assert.equal(host.definedIds.size, MAX_DEFINITIONS_PER_INSTANCE);
  const refused = h.logs.filter((l) => l.level === 'warn' && l.msg.startsWith('plugin metric refused'));
  assert.equal(refused.length, MAX_DEFINITIONS_PER_INSTANCE - MAX_LABEL_NAME_LISTS + 1, 'one line per refused definition, one when the instance is full');
  assert.match(refused[0]!.msg, /proxy_plugin_y is defined with 8 lists of label names already in this pipeline/);
  assert.match(refused.at(-1)!.msg, /the instance has made 1024 distinct definitions/);
  const lines = (await h.metrics()).split('\n').filter((l) => l.startsWith('# TYPE proxy_plugin_y'));
  assert.equal(lines.length, 1);
});

test('plugin metrics: at most 8 lists of label names per pipeline and metric, 200 characters a label name', () => {
  const reg = new PluginMetricRegistry(new Registry());
  for (let i = 0; i < MAX_LABEL_NAME_LISTS; i++) assert.equal(typeof reg.define(MetricKind.Counter, 'proxy_plugin_z', [`l${i}`], 'p', 'baseline'), 'object');
  assert.equal(typeof reg.define(MetricKind.Counter, 'proxy_plugin_z', ['l3'], 'p', 'baseline'), 'object', 'a list it holds is still defined');
  assert.match(reg.define(MetricKind.Counter, 'proxy_plugin_z', ['l8'], 'p', 'baseline') as string, /defined with 8 lists of label names already/);
  assert.equal(typeof reg.define(MetricKind.Counter, 'proxy_plugin_z', ['l8'], 'p', 'candidate'), 'object', 'each graph has its own lists');
  assert.equal(typeof reg.define(MetricKind.Counter, 'proxy_plugin_z', ['l8'], 'q', 'baseline'), 'object');
  assert.equal(reg.define(MetricKind.Counter, 'proxy_plugin_w', ['l'.repeat(201)], 'p', 'baseline'), 'a label name is longer than 200 characters');
});

test('plugin metrics: at most 1000 names per proxy and 200 characters a name', () => {
  const reg = new PluginMetricRegistry(new Registry());
  assert.equal(MAX_PLUGIN_METRICS, 1000);
  for (let i = 0; i < MAX_PLUGIN_METRICS; i++) assert.equal(typeof reg.define(MetricKind.Counter, `proxy_plugin_m${i}`, [], 'p', 'baseline'), 'object');
  assert.equal(reg.define(MetricKind.Counter, 'proxy_plugin_one_more', [], 'p', 'baseline'),
    'the proxy holds 1000 plugin metrics already (the most it defines)');
  assert.equal(typeof reg.define(MetricKind.Counter, 'proxy_plugin_m7', [], 'q', 'baseline'), 'object', 'a name it holds is still defined');
  assert.equal(new PluginMetricRegistry(new Registry()).define(MetricKind.Counter, `proxy_plugin_${'x'.repeat(200)}`, [], 'p', 'baseline'),
    'the name is longer than 200 characters');
});

for (const [name, [, error]] of Object.entries(LOAD)) {
  test(`a plugin that fails while it loads (${name}) is refused, naming the step and the reason`, async () => {
    await assert.rejects(PluginHarness.load(files[name]!, { pipelineId: name }), error);
  });
}

test('proxy serve: a plugin setting a command that is not BSON fails its step; the shared upstream connection and other clients are untouched', async (t) => {
  const devdb = new DevDbServer();
  t.after(() => devdb.close());
  const d = await devdb.listen(0);
  const config = join(dirname(files.grows!), 'proxy.json');
  writeFileSync(config, JSON.stringify({ listen: '127.0.0.1:0', log: { level: 'warn' }, upstream: { uri: d.uri, pool_size: 1 },
    pipeline: { request: ['evil'] }, steps: { evil: { module: files.set_body_not_bson, on_error: 'closed' } } }));
  const served = await spawnServe(['--config', config]);
  t.after(() => served.stop());
  const uri = /mongodb:\/\/[^\s"]+/.exec(served.out())![0];
  const good = new MongoClient(uri, { maxPoolSize: 2 });
  const bad = new MongoClient(uri, { maxPoolSize: 2 });
  t.after(async () => { await good.close(); await bad.close(); });
  await good.db('t').collection('fine').insertOne({ _id: 1 as never, v: 1 });
  const reads = (async () => {
    for (let i = 0; i < 100; i++) assert.equal((await good.db('t').collection('fine').findOne({ _id: 1 as never }))?.v, 1);
  })();
  // (4: five traps within 10 s would disable the step for everyone, as any crash loop does: docs/plugins.md)
  const refused = (async () => {
    for (let i = 0; i < 4; i++) {
      await assert.rejects(bad.db('t').collection('evil').findOne({}), (err: unknown) => {
        assert.ok(err instanceof MongoServerError);
        // the step's failure, not the upstream's answer to bytes it should never have been sent
        assert.equal(err.codeName, 'InternalError');
        assert.equal(err.message, 'pipeline step wasm:evil failed');
        return true;
      });
    }
  })();
  await Promise.all([reads, refused]);
  assert.equal((await bad.db('admin').command({ ping: 1 })).ok, 1);
  const lines = served.err().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: string; msg: string; err?: string });
  assert.deepEqual(lines.filter((l) => l.level === 'error'), []);
  assert.ok(lines.some((l) => l.level === 'warn' && /not a valid BSON document/.test(l.err ?? '')), served.err());
});

for (const [module, reason] of [['start_traps', /its start function failed: unreachable/], ['memory64', /uses WebAssembly features or instructions/]] as const) {
  test(`proxy serve: a plugin refused while it loads (${module}) stops the start, naming the step, with nothing but log lines on stderr`, () => {
    const config = join(dirname(files.grows!), `${module}.json`);
    writeFileSync(config, JSON.stringify({ listen: '127.0.0.1:0', upstream: { uri: 'mongodb://127.0.0.1:1' },
      pipeline: { request: ['step'] }, steps: { step: { module: files[module] } } }));
    const r = spawnSync(process.execPath, ['bin/proxy.mjs', 'serve', '--config', config, '--workers', '1'], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`^proxy: could not start: plugin wasm:step: ${reason.source}`, 'm'));
    assert.equal(r.stdout, '', 'no banner, and nothing binaryen printed');
    // every other line is a JSON log line (binaryen's validator printed its findings here before)
    assert.deepEqual(r.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('{') && !l.startsWith('proxy: could not start: ')), []);
  });
}
