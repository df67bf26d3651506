// Trace export end to end: the real `mongodb` driver → a real proxy → a TCP relay that records
// every command the upstream receives → the embedded devdb; the proxy exports to a real OTLP/HTTP
// receiver in this process (test/helpers/otlp-receiver.ts decodes the protobuf), and the tests
// check the SPEC §2.4 tree, its attributes and parenting, traceparent continuation and stripping,
// sampling, the JSON encoding, and a down or slow collector (requests unaffected, drops counted).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { deserialize, type Document } from 'bson';
import { parseConfig } from '../../runtime/config/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { Framer, parseOpMsg, decompressFrame, OP_MSG, OP_COMPRESSED } from '../../runtime/wire/index.ts';
import { Logger } from '../../runtime/log/index.ts';
import { startOtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.ts';
import { withProxy } from '../helpers/proxy.ts';
import { fixture } from '../wasm/fixtures.ts';

const cleanups: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => {});
});

/** A TCP relay in front of devdb that records the command documents going upstream. */
async function startRecordingUpstream(): Promise<{ uri: string; port: number; commands: Document[] }> {
  const devdb = new DevDbServer();
  const d = await devdb.listen(0);
  const commands: Document[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const up = connect(d.port, '127.0.0.1');
    sockets.add(client);
    sockets.add(up);
    const framer = new Framer({
      onFrame(frame: Buffer) {
        let f = frame;
        if (f.readInt32LE(12) === OP_COMPRESSED) f = decompressFrame(f).frame;
        if (f.readInt32LE(12) === OP_MSG) commands.push(deserialize(parseOpMsg(f).body));
        up.write(frame);
      },
      onFrameError() { client.destroy(); },
    });
    client.on('data', (c: Buffer) => framer.push(c));
    up.on('data', (c: Buffer) => client.write(c));
    client.on('close', () => up.destroy());
    up.on('close', () => client.destroy());
    client.on('error', () => {});
    up.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
    await devdb.close();
  });
  return { uri: `mongodb://127.0.0.1:${port}`, port, commands };
}

interface Traced {
  proxy: RunningProxy;
  client: MongoClient;
  upstream: { port: number; commands: Document[] };
  logLines: Array<Record<string, unknown>>;
}

async function start(telemetry: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<Traced> {
  const upstream = await startRecordingUpstream();
  const logLines: Array<Record<string, unknown>> = [];
  const log = new Logger('test', 'debug', 'json', {
    write: (l: string) => { for (const s of l.split('\n')) if (s.trim() !== '') logLines.push(JSON.parse(s)); },
  });
  const raw = {
    log: { level: 'info' },
    upstream: { uri: upstream.uri },
    pipeline: { request: ['filter', 'cache'], response: ['cache'] },
    steps: {
      filter: { config: { rules: [
        { name: 'evil-mail', action: 'deny', field: { path: 'filter.email', regex: '@evil\\.com$' } },
        { name: 'no-secrets', action: 'deny', collections: ['secrets'] },
      ], default: 'allow' } },
      cache: { config: { ttl_ms: 60000 } },
    },
    profiling: { port: 0 },
    telemetry: { service_name: 'proxy-test', sample_rate: 1, resource_attributes: { 'deployment.environment': 'test' }, export_interval_ms: 20, ...telemetry },
    ...extra,
  };
  // Closed with the rest, last opened first: the client, then the proxy.
  const { proxy } = await withProxy({ after: (fn) => cleanups.push(async () => fn()) }, raw, { log });
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000, monitorCommands: false });
  await client.connect();
  cleanups.push(() => client.close(true));
  return { proxy, client, upstream, logLines };
}

async function metrics(p: RunningProxy): Promise<string> {
  const res = await fetch(`${p.profilingUrl}/metrics`);
  return res.text();
}

function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  assert.ok(line !== undefined, `${series} is in /metrics`);
  return Number(line.slice(series.length + 1));
}

/** The spans of the trace whose root is the `proxy.request` with db.operation === op, on db.upstream.collection === collection. */
function traceOf(spans: ReceivedSpan[], op: string, collection: string): { root: ReceivedSpan; all: ReceivedSpan[] } {
  const roots = spans.filter((s) => s.name === 'proxy.request' && s.attributes['db.operation'] === op &&
    s.attributes['db.upstream.collection'] === collection);
  assert.equal(roots.length, 1, `one proxy.request for ${op} ${collection}, got ${roots.length}`);
  const root = roots[0];
  return { root, all: spans.filter((s) => s.traceId === root.traceId) };
}

/** The stable OpenTelemetry database names, sent only when OTEL_SEMCONV_STABILITY_OPT_IN opts in. */
const STABLE_DB_NAMES = ['db.system.name', 'db.operation.name', 'db.namespace', 'db.collection.name', 'server.address', 'server.port'];

const children = (all: ReceivedSpan[], parent: ReceivedSpan) =>
  all.filter((s) => s.parentSpanId === parent.spanId).sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));

/**
 * The tree under `root` as indented lines (children by start time), and a check that it holds every
 * span of the trace: each span's parent is in the tree, so none hangs off a span that was not sent.
 */
function treeOf(all: ReceivedSpan[], root: ReceivedSpan): string[] {
  const lines: string[] = [];
  const walk = (s: ReceivedSpan, depth: number) => {
    lines.push(`${'  '.repeat(depth)}${s.name}${s.attributes['proxy.step.phase'] !== undefined ? ` (${String(s.attributes['proxy.step.phase'])})` : ''}`);
    for (const c of children(all, s)) walk(c, depth + 1);
  };
  walk(root, 0);
  assert.equal(lines.length, all.length, `every span of the trace is in the tree under the root:\n${lines.join('\n')}`);
  return lines;
}

function assertWithin(child: ReceivedSpan, parent: ReceivedSpan): void {
  // 2 µs of slack: span times are rebuilt from performance.now() and step durations to the nanosecond.
  assert.ok(child.startNs + 2000n >= parent.startNs, `${child.name} starts within ${parent.name}`);
  assert.ok(child.endNs <= parent.endNs + 2000n, `${child.name} ends within ${parent.name}`);
  assert.ok(child.endNs >= child.startNs, `${child.name} ends after it starts`);
}

test('a find through the real driver exports the SPEC §2.4 tree: root, request steps, proxy.upstream (connection.acquire + operation), response ' +
  'steps, sub-operations, every attribute', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url });
  const coll = t.client.db('app').collection('users');
  await coll.insertOne({ email: 'ann@example.com' });
  const found = await coll.find({ email: 'ann@example.com' }).toArray();
  assert.equal(found.length, 1);
  await t.proxy.tracing!.flush();
  const spans = await receiver.waitForSpans(1);
  assert.ok(receiver.requests.every((r) => r.contentType === 'application/x-protobuf'), 'protobuf by default');
  const { root, all } = traceOf(spans, 'find', 'users');

  assert.equal(root.parentSpanId, '', 'the root has no parent (the client sent no trace context)');
  assert.equal(root.kind, 2, 'proxy.request is a SERVER span');
  assert.match(root.traceId, /^[0-9a-f]{32}$/);
  assert.equal(root.resource['service.name'], 'proxy-test');
  assert.equal(root.resource['deployment.environment'], 'test');
  assert.equal(root.attributes['proxy.pipeline.id'], 'default');
  assert.equal(root.attributes['proxy.pipeline'], 'baseline');
  assert.equal(root.status, 0);

  const top = children(all, root).map((s) => `${s.name}/${s.attributes['proxy.step.phase'] ?? '-'}`);
  assert.deepEqual(top, ['proxy.step.filter/request', 'proxy.step.cache/request', 'proxy.upstream/-', 'proxy.step.cache/response']);
  for (const s of children(all, root)) assertWithin(s, root);

  const [filter, cacheReq, upstream, cacheResp] = children(all, root);
  const db = {
    'db.system': 'mongodb', 'db.operation': 'find', 'db.upstream.collection': 'users',
    'net.peer.name': '127.0.0.1', 'net.peer.port': t.upstream.port,
  };
  // OTEL_SEMCONV_STABILITY_OPT_IN unset: the contract's names only, on every span that has database attributes.
  for (const s of all) {
    for (const k of STABLE_DB_NAMES) assert.equal(s.attributes[k], undefined, `${s.name}: no ${k} unless opted in`);
  }
  for (const [k, v] of Object.entries(db)) assert.equal(root.attributes[k], v, `proxy.request ${k}`);
  for (const [span, name, phase, order] of [[filter, 'wasm:filter', 'request', 1], [cacheReq, 'wasm:cache', 'request', 2],
    [cacheResp, 'wasm:cache', 'response', 1]] as const) {
    for (const [k, v] of Object.entries(db)) assert.equal(span.attributes[k], v, `${span.name} (${phase}) ${k}`);
    assert.equal(span.attributes['proxy.step.name'], name);
    assert.equal(span.attributes['proxy.step.phase'], phase);
    assert.equal(span.attributes['proxy.step.order'], order);
    assert.equal(span.attributes['proxy.step.error'], false);
    assert.equal(typeof span.attributes['proxy.step.duration_us'], 'number');
    const durUs = Number(span.endNs - span.startNs) / 1000;
    assert.ok(Math.abs(durUs - (span.attributes['proxy.step.duration_us'] as number)) <= 1, `${span.name} duration matches proxy.step.duration_us`);
  }
  // Sub-operations under their steps.
  assert.deepEqual(children(all, filter).map((s) => s.name), ['regex.eval']);
  assert.deepEqual(children(all, cacheReq).map((s) => s.name), ['cache.lookup']);
  assert.deepEqual(children(all, cacheResp).map((s) => s.name), ['cache.store']);
  for (const [p, c] of [[filter, children(all, filter)[0]], [cacheReq, children(all, cacheReq)[0]]] as const) assertWithin(c, p);
  // A sub-operation's attributes: its step, its measured duration, the graph (as docs/tracing.md lists them).
  for (const [step, name] of [[filter, 'wasm:filter'], [cacheReq, 'wasm:cache'], [cacheResp, 'wasm:cache']] as const) {
    const sub = children(all, step)[0];
    assert.deepEqual(Object.keys(sub.attributes).sort(), ['proxy.pipeline', 'proxy.pipeline.id', 'proxy.step.name', 'proxy.subop.duration_us']);
    assert.equal(sub.attributes['proxy.step.name'], name);
    assert.equal(sub.attributes['proxy.pipeline'], 'baseline');
    assert.equal(sub.attributes['proxy.pipeline.id'], 'default');
    assert.equal(typeof sub.attributes['proxy.subop.duration_us'], 'number');
    assert.equal(sub.kind, 1, `${sub.name} is an INTERNAL span`);
  }

  // proxy.upstream: connection.acquire, then the operation span named "{operation} {collection}".
  const up = children(all, upstream);
  assert.deepEqual(up.map((s) => s.name), ['connection.acquire', 'find users']);
  assert.equal(up[1].kind, 3, 'the upstream operation is a CLIENT span');
  for (const [k, v] of Object.entries(db)) {
    assert.equal(up[1].attributes[k], v, `operation span ${k}`);
    assert.equal(up[0].attributes[k], v, `connection.acquire ${k}`);
    assert.equal(upstream.attributes[k], v, `proxy.upstream ${k}`);
  }
  for (const s of up) assertWithin(s, upstream);
  assert.ok(filter.endNs <= upstream.startNs + 2000n && upstream.endNs <= cacheResp.startNs + 2000n, 'request steps, then upstream, then response steps');
});

/** `fn` run with the environment variable `name` set to `value`, restored after. */
async function withEnv<T>(name: string, value: string, fn: () => Promise<T>): Promise<T> {
  const before = process.env[name];
  process.env[name] = value;
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}

test('OTEL_SEMCONV_STABILITY_OPT_IN with database/dup (protobuf and JSON): the stable database names as well, on proxy.request and the ' +
  'operation span only; the contract\'s names stay on every span', async () => {
  for (const protocol of ['http/protobuf', 'http/json'] as const) {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    // Read as OpenTelemetry reads it: a comma-separated list, entries trimmed, case ignored, other domains' entries ignored.
    const t = await withEnv('OTEL_SEMCONV_STABILITY_OPT_IN', ' http , Database/Dup', () => start({ otlp_endpoint: receiver.url, protocol }));
    await t.client.db('shop').collection('orders').findOne({ a: 1 });
    await t.proxy.tracing!.flush();
    const { root, all } = traceOf(await receiver.waitForSpans(1), 'find', 'orders');
    const op = all.find((s) => s.kind === 3);
    assert.equal(op?.name, 'find orders', `${protocol}: the operation span`);
    const stable = {
      'db.system.name': 'mongodb', 'db.operation.name': 'find', 'db.namespace': 'shop', 'db.collection.name': 'orders',
      'server.address': '127.0.0.1', 'server.port': t.upstream.port,
    };
    const contract = {
      'db.system': 'mongodb', 'db.operation': 'find', 'db.upstream.collection': 'orders', 'net.peer.name': '127.0.0.1', 'net.peer.port': t.upstream.port,
    };
    const subops = new Set(['regex.eval', 'cache.lookup', 'cache.store']);
    assert.deepEqual(treeOf(all, root), ['proxy.request', '  proxy.step.filter (request)', '  proxy.step.cache (request)', '    cache.lookup',
      '  proxy.upstream', '    connection.acquire', '    find orders', '  proxy.step.cache (response)', '    cache.store'], `${protocol}: the tree`);
    for (const s of all) {
      const withStable: boolean = s === root || s === op;
      for (const [k, v] of Object.entries(stable)) {
        assert.equal(s.attributes[k], withStable ? v : undefined, `${protocol}: ${s.name} ${k} ${withStable ? 'sent' : 'not sent'}`);
      }
      if (subops.has(s.name)) continue;
      for (const [k, v] of Object.entries(contract)) assert.equal(s.attributes[k], v, `${protocol}: ${s.name} keeps ${k}`);
    }
  }
});

test('a canary: requests the candidate graph serves carry proxy.pipeline "candidate" on every span, the others "baseline"', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const token = 'tracing-canary-token';
  const dataDir = mkdtempSync(join(tmpdir(), 'tracing-canary-'));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const t = await start({ otlp_endpoint: receiver.url }, { control_plane: { port: 0, tokens: [token] }, canary: { data_dir: dataDir },
    profiling: { port: 0, enabled: true } });
  const res = await fetch(`${t.proxy.controlPlaneUrl}/api/v1/canary`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      pipeline_id: 'default', auto_promote: false, candidate_config: { steps: [{ type: 'logging', phase: 'response', config: {} }] },
      stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
      rollback_rules: { check_interval: '1h' },
    }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  const coll = t.client.db('app').collection('canaried');
  const n = 40;
  for (let i = 0; i < n; i++) await coll.findOne({ i });
  await t.proxy.tracing!.flush();
  const spans = await receiver.waitForSpans(n);
  const roots = spans.filter((s) => s.name === 'proxy.request' && s.attributes['db.upstream.collection'] === 'canaried');
  assert.equal(roots.length, n, 'one trace per request');
  const byVariant = new Map<string, number>();
  for (const root of roots) {
    const variant = root.attributes['proxy.pipeline'] as string;
    byVariant.set(variant, (byVariant.get(variant) ?? 0) + 1);
    const all = spans.filter((s) => s.traceId === root.traceId);
    // Every span, sub-operations included: none may lack the attributes.
    for (const s of all) {
      assert.equal(s.attributes['proxy.pipeline'], variant, `${variant} trace: ${s.name} names the graph that served it`);
      assert.equal(s.attributes['proxy.pipeline.id'], 'default', `${variant} trace: ${s.name} names the pipeline`);
    }
    assert.ok(all.some((s) => s.name === 'cache.lookup'), 'the trace has sub-operation spans to check');
    // The candidate graph is the baseline's steps plus a response-phase logging step: its traces show it.
    const steps = all.filter((s) => s.name.startsWith('proxy.step.')).map((s) => s.name);
    assert.equal(steps.includes('proxy.step.logging'), variant === 'candidate', `${variant} trace steps: ${steps.join(', ')}`);
  }
  // 50% split over 40 requests: both graphs served some (a 1 in 5·10^11 chance of failing by luck).
  assert.ok((byVariant.get('candidate') ?? 0) > 0 && (byVariant.get('baseline') ?? 0) > 0, `split: ${JSON.stringify([...byVariant])}`);
});

test('a request a step rejects: root and step marked as errors with db.response.status_code and error.type, no proxy.upstream', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url });
  await assert.rejects(t.client.db('app').collection('secrets').findOne({}), /denied by filter rule "no-secrets"/);
  await t.proxy.tracing!.flush();
  const { root, all } = traceOf(await receiver.waitForSpans(1), 'find', 'secrets');
  assert.equal(root.status, 2, 'root status ERROR');
  assert.equal(root.attributes['db.response.status_code'], '13');
  assert.equal(root.attributes['error.type'], 'Unauthorized');
  const names = children(all, root).map((s) => s.name);
  assert.deepEqual(names, ['proxy.step.filter'], 'the filter ran; the cache and the upstream did not');
  assert.equal(all.some((s) => s.name === 'proxy.upstream'), false);
  const filter = children(all, root)[0];
  assert.equal(filter.attributes['proxy.step.error'], true, 'the rejecting step is marked');
  assert.equal(filter.status, 2, 'the rejecting step has status ERROR');
  assert.equal(filter.attributes['db.response.status_code'], '13');
  assert.equal(filter.attributes['error.type'], 'Unauthorized');
  // No upstream served it: the address attributes are left out rather than sent empty.
  assert.equal(root.attributes['net.peer.name'], undefined);
  assert.equal(root.attributes['net.peer.port'], undefined);
  assert.equal(filter.attributes['net.peer.name'], undefined);
});

test('a response-phase step rejects a good reply: the step and the root are errors, the upstream operation span is not', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url }, {
    pipeline: { request: ['cache'], response: ['wasm:reject_reply', 'cache'] },
    steps: { cache: { config: { ttl_ms: 60000 } }, reject_reply: { module: await fixture('reject_reply') } },
  });
  await assert.rejects(t.client.db('app').collection('refused').findOne({}), /reply refused by reject_reply/);
  await t.proxy.tracing!.flush();
  const { root, all } = traceOf(await receiver.waitForSpans(1), 'find', 'refused');
  assert.deepEqual(treeOf(all, root), [
    'proxy.request',
    '  proxy.step.cache (request)',
    '    cache.lookup',
    '  proxy.upstream',
    '    connection.acquire',
    '    find refused',
    '  proxy.step.reject_reply (response)',
  ]);
  assert.equal(root.status, 2);
  assert.equal(root.attributes['error.type'], 'Unauthorized');
  const rejecter = all.find((s) => s.name === 'proxy.step.reject_reply')!;
  assert.equal(rejecter.status, 2);
  assert.equal(rejecter.attributes['proxy.step.error'], true);
  assert.equal(rejecter.attributes['error.type'], 'Unauthorized');
  const cache = all.find((s) => s.name === 'proxy.step.cache')!;
  assert.equal(cache.status, 0);
  assert.equal(cache.attributes['proxy.step.error'], false);
  for (const name of ['proxy.upstream', 'connection.acquire', 'find refused']) {
    const s = all.find((x) => x.name === name)!;
    assert.equal(s.status, 0, `${name} succeeded: status UNSET`);
    assert.equal(s.attributes['error.type'], undefined, `${name} has no error.type`);
    assert.equal(s.attributes['db.response.status_code'], undefined, `${name} has no status code`);
  }
});

test('errors the upstream returns: error.type is the code name — DuplicateKey for a duplicate-key insert (a write error), the reply\'s codeName ' +
  'for ok: 0', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url });
  const db = t.client.db('app');
  const dups = db.collection('dups');
  await dups.insertOne({ _id: 7 } as Document);
  await assert.rejects(dups.insertOne({ _id: 7 } as Document), (e: { code?: number }) => e.code === 11000);
  await db.createCollection('made');
  await assert.rejects(db.createCollection('made'), (e: { code?: number }) => e.code === 48);
  await t.proxy.tracing!.flush();
  const spans = await receiver.waitForSpans(1);
  const inserts = spans.filter((s) => s.name === 'proxy.request' && s.attributes['db.upstream.collection'] === 'dups');
  assert.equal(inserts.length, 2);
  const [good, dup] = inserts.sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
  assert.equal(good.status, 0, 'the first insert succeeded');
  assert.equal(good.attributes['error.type'], undefined);
  const all = spans.filter((s) => s.traceId === dup.traceId);
  const op = all.find((s) => s.name === 'insert dups')!;
  for (const s of [dup, op]) {
    assert.equal(s.status, 2, `${s.name}: status ERROR`);
    assert.equal(s.attributes['db.response.status_code'], '11000', `${s.name}: the code`);
    assert.equal(s.attributes['error.type'], 'DuplicateKey', `${s.name}: the code name`);
  }
  // create: an ok: 0 reply; its codeName is read from the reply (48 is not a code the proxy names itself).
  const creates = spans.filter((s) => s.name === 'proxy.request' && s.attributes['db.operation'] === 'create');
  assert.equal(creates.length, 2);
  const failed = creates.find((s) => s.status === 2)!;
  assert.equal(failed.attributes['db.response.status_code'], '48');
  assert.equal(failed.attributes['error.type'], 'NamespaceExists');
  const createOp = spans.find((s) => s.traceId === failed.traceId && s.kind === 3)!;
  assert.equal(createOp.attributes['error.type'], 'NamespaceExists');
  assert.equal(createOp.status, 2);
});

test('an inbound $traceparent is continued (root is a child of the client span, the exact tree under it) and stripped: the upstream never sees it',
  async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const t = await start({ otlp_endpoint: receiver.url, sample_rate: 0 });
    const traceId = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    const spanId = '0123456789abcdef';
    const db = t.client.db('app');
    await db.collection('users').insertOne({ email: 'bob@example.com' });
    const reply = await db.command({ find: 'users', filter: { email: 'bob@example.com' }, $traceparent: `00-${traceId}-${spanId}-01` });
    assert.equal(reply.ok, 1);
    assert.equal((reply.cursor as Document).firstBatch.length, 1);
    await t.proxy.tracing!.flush();
    const { root, all } = traceOf(await receiver.waitForSpans(1), 'find', 'users');
    assert.equal(root.traceId, traceId, 'the proxy continues the client trace');
    assert.equal(root.parentSpanId, spanId, 'the root span is a child of the client span');
    // The whole tree, in the client's trace: every span's parent, name and place among its siblings.
    assert.deepEqual(treeOf(all, root), [
      'proxy.request',
      '  proxy.step.filter (request)',
      '    regex.eval',
      '  proxy.step.cache (request)',
      '    cache.lookup',
      '  proxy.upstream',
      '    connection.acquire',
      '    find users',
      '  proxy.step.cache (response)',
      '    cache.store',
    ]);
    assert.equal(all.filter((s) => s.parentSpanId === spanId).length, 1, 'only the root hangs off the client span');
    assert.deepEqual(children(all, root).map((s) => s.attributes['proxy.step.order'] ?? '-'), [1, 2, '-', 1]);
    for (const s of all) {
      assert.notEqual(s.spanId, spanId, `${s.name} has its own span id`);
      assert.equal(s.attributes['proxy.pipeline.id'], 'default', `${s.name} names its pipeline`);
    }
    // sample_rate 0, yet sampled: the client's sampled flag decides (parent-based).
    assert.equal(receiver.spans.filter((s) => s.name === 'proxy.request').length, 1, 'the insert (no traceparent) was not sampled');
    const finds = t.upstream.commands.filter((c) => c.find === 'users');
    assert.equal(finds.length, 1);
    assert.equal('$traceparent' in finds[0], false, 'the upstream never sees $traceparent');
    assert.deepEqual(finds[0].filter, { email: 'bob@example.com' }, 'the rest of the command is forwarded unchanged');
    assert.ok(t.upstream.commands.every((c) => !('$traceparent' in c)));
  });

test('a traceparent in comment (the driver\'s find option) is continued; the comment is forwarded unchanged', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url, sample_rate: 0 });
  const tp = '00-11112222333344445555666677778888-99990000aaaabbbb-01';
  await t.client.db('app').collection('orders').find({}, { comment: tp }).toArray();
  await t.client.db('app').collection('carts').find({}, { comment: { traceparent: '00-aaaabbbbccccddddeeeeffff00001111-2222333344445555-01',
    app: 'shop' } }).toArray();
  await t.proxy.tracing!.flush();
  const spans = await receiver.waitForSpans(1);
  const a = traceOf(spans, 'find', 'orders').root;
  assert.equal(a.traceId, '11112222333344445555666677778888');
  assert.equal(a.parentSpanId, '99990000aaaabbbb');
  const b = traceOf(spans, 'find', 'carts').root;
  assert.equal(b.traceId, 'aaaabbbbccccddddeeeeffff00001111');
  assert.equal(b.parentSpanId, '2222333344445555');
  assert.equal(t.upstream.commands.find((c) => c.find === 'orders')?.comment, tp);
});

test('a sqlcommenter comment (traceparent=\'00-…\') is continued and forwarded unchanged; ordinary comments are not traceparent attempts, a ' +
  'malformed one is counted', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url, sample_rate: 0 });
  const coll = (name: string) => t.client.db('app').collection(name);
  const comment = "checkout traceparent='00-0123456789abcdef0123456789abcdef-fedcba9876543210-01',route='/cart'";
  await coll('sql').find({}, { comment }).toArray();
  await coll('plain').find({}, { comment: 'user-lookup' }).toArray();
  await coll('plain').find({}, { comment: 'ad-hoc report' }).toArray();
  await coll('plain').find({}, { comment: { app: 'shop', step: 'cart-view' } }).toArray();
  await coll('bad').find({}, { comment: '00-0123456789abcdef0123-01' }).toArray();
  await coll('bad').find({}, { comment: "traceparent='00-xyz'" }).toArray();
  await t.proxy.tracing!.flush();
  const root = traceOf(await receiver.waitForSpans(1), 'find', 'sql').root;
  assert.equal(root.traceId, '0123456789abcdef0123456789abcdef');
  assert.equal(root.parentSpanId, 'fedcba9876543210');
  assert.equal(t.upstream.commands.find((c) => c.find === 'sql')?.comment, comment, 'the comment is the client\'s: forwarded unchanged');
  assert.equal(receiver.spans.filter((s) => s.name === 'proxy.request').length, 1, 'the others were not sampled (sample_rate 0)');
  const debug = t.logLines.filter((l) => l.msg === 'invalid traceparent ignored');
  assert.deepEqual(debug.map((l) => l.value), ['00-0123456789abcdef0123-01', '00-xyz'], 'only the two traceparent attempts are logged');
  assert.equal(metricValue(await metrics(t.proxy), 'proxy_trace_invalid_traceparent_total'), 2, 'and counted');
});

test('a client traceparent with the sampled flag off is not traced even at sample_rate 1; invalid values are ignored with a debug line, stripped, ' +
  'and the request succeeds', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url, sample_rate: 1 });
  const db = t.client.db('app');
  await db.command({ find: 'unsampled', filter: {}, $traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' });
  const invalid = [
    '00-00000000000000000000000000000000-b7ad6b7169203331-01', // all-zero trace id
    '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01', // all-zero parent id
    '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0', // wrong length
    'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', // bad version
  ];
  for (const tp of invalid) {
    const r = await db.command({ find: 'invalid', filter: {}, $traceparent: tp });
    assert.equal(r.ok, 1);
  }
  await t.proxy.tracing!.flush();
  const spans = await receiver.waitForSpans(4 * 5);
  assert.equal(spans.filter((s) => s.attributes['db.upstream.collection'] === 'unsampled').length, 0, 'sampled flag 00: no spans');
  const roots = spans.filter((s) => s.name === 'proxy.request' && s.attributes['db.upstream.collection'] === 'invalid');
  assert.equal(roots.length, 4, 'invalid contexts are ignored: the requests are traced as new traces (sample_rate 1)');
  for (const r of roots) {
    assert.equal(r.parentSpanId, '');
    assert.notEqual(r.traceId, '0af7651916cd43dd8448eb211c80319c');
  }
  const debug = t.logLines.filter((l) => l.msg === 'invalid traceparent ignored');
  assert.equal(debug.length, 4);
  assert.ok(debug.every((l) => l.level === 'debug' && l.logger === 'proxy::telemetry'));
  assert.match(String(debug[0].reason), /all zeros/);
  assert.match(String(debug[3].reason), /version/);
  assert.equal(t.upstream.commands.filter((c) => '$traceparent' in c).length, 0);
  assert.equal(metricValue(await metrics(t.proxy), 'proxy_trace_invalid_traceparent_total'), 4);
});

test('sample_rate 0 exports nothing; sample_rate 1 traces every request; 0.3 samples about 30% (statistically)', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  for (const [rate, n] of [[0, 200], [1, 50], [0.3, 1000]] as const) {
    const t = await start({ otlp_endpoint: receiver.url, sample_rate: rate, service_name: `rate-${rate}` });
    const db = t.client.db('app');
    for (let i = 0; i < n; i++) await db.command({ ping: 1 }).then(() => db.collection('c').findOne({ i }));
    await t.proxy.tracing!.flush();
    const sampled = metricValue(await metrics(t.proxy), 'proxy_trace_requests_sampled_total');
    const roots = receiver.spans.filter((s) => s.name === 'proxy.request' && s.resource['service.name'] === `rate-${rate}`).length;
    assert.equal(roots, sampled, `rate ${rate}: one exported trace per sampled request`);
    // Each iteration is 2 pipeline requests (ping, find).
    if (rate === 0) assert.equal(sampled, 0);
    else if (rate === 1) assert.equal(sampled, 2 * n);
    else {
      // Binomial(2000, 0.3): mean 600, sd 20.5; ±5 sd.
      assert.ok(sampled > 600 - 103 && sampled < 600 + 103, `rate 0.3 sampled ${sampled} of 2000`);
    }
  }
});

test('telemetry.sample_rate applies on reload (0 → 1 → 0) without a restart; other telemetry keys are reported as restart-only', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url, sample_rate: 0, service_name: 'reloaded' });
  const raw = (rate: number, serviceName = 'reloaded') => parseConfig({
    ...t.proxy.config, telemetry: { ...t.proxy.config.telemetry, sample_rate: rate, service_name: serviceName },
  }, null);
  const coll = t.client.db('app').collection('reload');
  const sampled = async () => metricValue(await metrics(t.proxy), 'proxy_trace_requests_sampled_total');
  for (let i = 0; i < 20; i++) await coll.findOne({ i });
  assert.equal(await sampled(), 0, 'sample_rate 0: nothing sampled');

  await t.proxy.reload(raw(1));
  for (let i = 0; i < 20; i++) await coll.findOne({ i });
  assert.equal(await sampled(), 20, 'after the reload to 1: every request sampled, on the same connection');
  await t.proxy.tracing!.flush();
  assert.equal(receiver.spans.filter((s) => s.name === 'proxy.request' && s.resource['service.name'] === 'reloaded').length, 20);

  await t.proxy.reload(raw(0));
  for (let i = 0; i < 20; i++) await coll.findOne({ i });
  assert.equal(await sampled(), 20, 'back to 0: none more');
  assert.ok(!t.logLines.some((l) => l.msg === 'configuration reloaded; these keys take effect only after a restart'), 'a sample_rate change is not ' +
    'restart-only');

  await t.proxy.reload(raw(1, 'renamed'));
  const warned = t.logLines.find((l) => l.msg === 'configuration reloaded; these keys take effect only after a restart');
  assert.deepEqual(warned?.keys, ['telemetry.service_name'], 'another telemetry key needs a restart');
  for (let i = 0; i < 5; i++) await coll.findOne({ i });
  assert.equal(await sampled(), 25, 'sample_rate applies by itself (each key by its own reload mark)');
  await t.proxy.tracing!.flush();
  assert.equal(receiver.spans.filter((s) => s.resource['service.name'] === 'renamed').length, 0, 'the service name waits for a restart');
});

test('the JSON encoding (protocol http/json) exports the same tree', async () => {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: `${receiver.url}/v1/traces`, protocol: 'http/json' });
  await t.client.db('app').collection('json').findOne({});
  await t.proxy.tracing!.flush();
  const { root, all } = traceOf(await receiver.waitForSpans(1), 'find', 'json');
  assert.ok(receiver.requests.every((r) => r.contentType.startsWith('application/json')));
  assert.deepEqual(children(all, root).map((s) => s.name), ['proxy.step.filter', 'proxy.step.cache', 'proxy.upstream', 'proxy.step.cache']);
});

async function timedFinds(client: MongoClient, n: number): Promise<number[]> {
  const coll = client.db('app').collection('load');
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await coll.findOne({ i });
    times.push(performance.now() - t0);
  }
  return times;
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];

test('a collector that is down: every request succeeds as fast as without tracing, and the lost spans are counted in /metrics', async () => {
  // A port nothing listens on.
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const deadPort = (probe.address() as { port: number }).port;
  await new Promise((r) => probe.close(r));
  const down = await start({ otlp_endpoint: `http://127.0.0.1:${deadPort}`, export_timeout_ms: 500 });
  const off = await start({}, {});
  await timedFinds(down.client, 50);
  await timedFinds(off.client, 50);
  const withDown = median(await timedFinds(down.client, 300));
  const without = median(await timedFinds(off.client, 300));
  await down.proxy.tracing!.flush();
  const text = await metrics(down.proxy);
  const failed = metricValue(text, 'proxy_trace_spans_dropped_total{reason="export_failed"}');
  assert.ok(failed > 0, `spans lost to the down collector are counted (${failed})`);
  assert.equal(metricValue(text, 'proxy_trace_spans_exported_total'), 0);
  // The medians of two proxies in one process: a down collector adds no wait to requests.
  assert.ok(withDown < without * 2 + 0.5, `median with a down collector ${withDown.toFixed(3)} ms vs tracing off ${without.toFixed(3)} ms`);
  assert.equal(off.proxy.tracing, null, 'no otlp_endpoint: tracing is off');
  assert.ok(down.logLines.some((l) => l.msg === 'trace export failed; spans dropped' && l.level === 'warn'));
});

test('a slow collector: the bounded queue fills, later spans are dropped and counted (queue_full), requests do not wait', async () => {
  const receiver = await startOtlpReceiver({ delayMs: 3000 });
  cleanups.push(() => receiver.close());
  const t = await start({ otlp_endpoint: receiver.url, max_queue_spans: 64, max_batch_spans: 32 });
  const times = await timedFinds(t.client, 200);
  assert.ok(median(times) < 50, `median request ${median(times).toFixed(3)} ms while the collector takes 3 s per export`);
  const text = await metrics(t.proxy);
  const full = metricValue(text, 'proxy_trace_spans_dropped_total{reason="queue_full"}');
  assert.ok(full > 1000, `spans dropped at the full queue are counted (${full})`);
  assert.ok(metricValue(text, 'proxy_trace_spans_queued') <= 64, 'the queue stays bounded');
});

test('bad telemetry config is refused with the key path and the reason', () => {
  assert.throws(() => parseConfig({ telemetry: { sample_rate: 1.5 } }, null), /telemetry\.sample_rate.*(1|number 0\.\.1)/s);
  assert.throws(() => parseConfig({ telemetry: { otlp_endpoint: 'collector:4318' } }, null), /telemetry\.otlp_endpoint/);
  assert.throws(() => parseConfig({ telemetry: { propagation: 'b3' } }, null), /telemetry\.propagation/);
  assert.throws(() => parseConfig({ telemetry: { resource_attributes: { 'service.version': 3 } } }, null),
    /telemetry\.resource_attributes\.service\.version: expected string, received 3/);
  assert.throws(() => parseConfig({ telemetry: { resource_attributes: { 'bad key!': 'x' } } }, null),
    /telemetry\.resource_attributes\.bad key!: invalid key: expected an attribute name: letters, digits.*received "bad key!"/);
});
