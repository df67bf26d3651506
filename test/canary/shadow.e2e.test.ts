// Shadow canaries end to end, with the official `mongodb` driver through a real proxy and the
// built-in plugins: a candidate is a different configuration of the same built-in step (transform
// v2 redacting one more field; filter v2 denying what v1 allows). The candidate runs beside the
// baseline on every request (shadow_pct 100) while its stage serves no client with it: the
// divergences are counted and diffed, clients get v1's answers, no write reaches the upstream
// twice (counted at a devdb replica set member), the candidate's cost shows in /api/profile as the
// `candidate` graph, and the rules promote a clean shadow stage and roll back a divergent one; a
// slow candidate does not delay replies; shadow_upstream_reads fetches differing reads, never
// writes; `proxy canary diffs` and `start --shadow` through the real CLI.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { execFile, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevReplicaSet } from '../../runtime/devdb/index.ts';
import { RecordingEventSink } from '../../runtime/canary/index.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';
import { until } from '../helpers/until.ts';
import { freePort } from '../helpers/ports.ts';
import { fixture } from '../wasm/fixtures.ts';

const TOKEN = 'shadow-e2e-token-0123456789';
const ADMIN = 'shadow-admin-token-0123456789';
const dirs: string[] = [];
const clients: MongoClient[] = [];
const proxies = new Closes();
let rs: DevReplicaSet | null = null;

after(async () => {
  for (const c of clients) await c.close(true);
  await proxies.run();
  await rs?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function api(base: string) {
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}/api/v1/canary${path}`, {
      method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() as any };
  };
}

async function start(config: Record<string, unknown>, sink?: RecordingEventSink) {
  const dir = mkdtempSync(join(tmpdir(), 'shadow-e2e-'));
  dirs.push(dir);
  const { proxy, uri } = await withProxy(proxies, { control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: dir }, ...config },
    sink === undefined ? {} : { canarySink: sink });
  const client = new MongoClient(uri, { maxPoolSize: 4 });
  clients.push(client);
  return { proxy, client, call: api(proxy.controlPlaneUrl!) };
}

const REDACT_SSN = { op: 'redact', path: 'ssn' };
const REDACT_EMAIL = { op: 'redact', path: 'email' };
/** A shadow stage that never promotes by itself, then full exposure. */
const HOLD = [{ traffic_pct: 0, min_duration: '1h', min_requests: 1_000_000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }];

test('transform v2 redacting one more field: divergence on exactly the replies holding it, paths right, values hidden, clients get v1\'s bytes',
  async () => {
    const { proxy, client, call } = await start({
      admin: { listen: '127.0.0.1:0', token: ADMIN },
      pipeline: { request: [], response: ['transform'] }, steps: { transform: { config: { response: [REDACT_SSN] } } },
    });
    const people = client.db('app').collection<{ _id: number }>('people');
    const docs = Array.from({ length: 12 }, (_, i) => i % 3 === 0 ? { _id: i, name: `p${i}`, ssn: `ssn-${i}`, email: `p${i}@x.test` }
      : { _id: i, name: `p${i}`, ssn: `ssn-${i}` });
    await people.insertMany(docs);
    // v1's replies, as raw BSON documents, before any canary.
    const before = new Map<number, Buffer>();
    for (const d of docs) before.set(d._id, (await people.find({ _id: d._id }, { raw: true }).toArray())[0] as unknown as Buffer);

    const created = await call('POST', '', {
      mode: 'shadow', shadow_pct: 100, auto_promote: false,
      candidate_config: { steps: [{ type: 'transform', config: { response: [REDACT_SSN, REDACT_EMAIL] } }] }, stages: HOLD,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.traffic_pct, 0);
    const id = created.body.canary_id;

    for (const d of docs) {
      const got = (await people.find({ _id: d._id }, { raw: true }).toArray())[0] as unknown as Buffer;
      assert.ok(Buffer.compare(got, before.get(d._id)!) === 0, `document ${d._id}: the client gets v1's bytes`);
    }
    const withEmail = docs.filter((d) => 'email' in d).length;
    const diffs = (await call('GET', `/${id}/diffs`)).body;
    assert.equal(diffs.sampled, docs.length, JSON.stringify(diffs));
    assert.equal(diffs.diverged, withEmail);
    assert.deepEqual(diffs.by_kind, { outcome: 0, request: 0, reply: withEmail });
    assert.equal(diffs.show_values, false);
    assert.equal(diffs.diffs.length, withEmail);
    for (const d of diffs.diffs) {
      assert.equal(d.kind, 'reply');
      assert.equal(d.op, 'find');
      assert.equal(`${d.db}.${d.collection}`, 'app.people');
      assert.deepEqual(d.paths, [{ path: 'cursor.firstBatch.0.email', change: 'changed', baseline_type: 'string', candidate_type: 'string' }]);
    }
    // Values hidden: neither the address nor the redaction appear anywhere in the diffs.
    assert.doesNotMatch(JSON.stringify(diffs), /@x\.test|\*\*\*/);
    const status = (await call('GET', `/${id}`)).body;
    assert.equal(status.mode, 'shadow');
    assert.equal(status.shadow.diverged, withEmail);
    assert.equal(status.shadow.latest_diffs.length, Math.min(5, withEmail));
    // `proxy canary diffs <pipeline>`: one group of the four replies, the path, no values.
    // (A child process, run asynchronously: the proxy answering it is this process.)
    const cli = await promisify(execFile)(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'canary', 'diffs', 'default'], {
      env: { ...process.env, PROXY_CONTROL_URL: proxy.controlPlaneUrl!, PROXY_CONTROL_TOKEN: TOKEN }, encoding: 'utf8',
    });
    assert.match(cli.stdout, new RegExp(`${withEmail} of ${docs.length} shadowed requests diverged`));
    assert.match(cli.stdout, /^COUNT\s+KIND\s+PATHS\s+SAMPLE$/m);
    assert.match(cli.stdout, new RegExp(`^${withEmail}\\s+reply find\\s+cursor\\.firstBatch\\.0\\.email changed\\s+app\\.people `, 'm'));
    assert.doesNotMatch(cli.stdout, /@x\.test/);
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text();
    assert.match(metrics, new RegExp(`^proxy_canary_divergence_total\\{kind="reply"\\} ${withEmail}$`, 'm'));
    assert.match(metrics, new RegExp(`^proxy_canary_shadow_requests_total ${docs.length}$`, 'm'));
    assert.match(metrics, /^proxy_canary_shadow_memory_bytes [1-9]\d*$/m);
  });

test('filter v2 rejecting a command v1 allows: an outcome divergence, the client served by v1, no write sent upstream twice', async () => {
  rs = await DevReplicaSet.start(1, 'rs0');
  const { client, call } = await start({
    upstream: { uri: rs.uri([0]), connect_timeout_ms: 2000 },
    pipeline: { request: ['filter'], response: [] },
    steps: { filter: { config: { rules: [{ name: 'no-drop', action: 'deny', ops: ['drop'] }], default: 'allow' } } },
  });
  const audit = client.db('app').collection('audit');
  await audit.findOne({});
  const created = await call('POST', '', {
    mode: 'shadow', shadow_pct: 100, auto_promote: false, stages: HOLD,
    candidate_config: { steps: [{ type: 'filter', config: { rules: [{ name: 'no-drop', action: 'deny', ops: ['drop'] },
      { name: 'no-audit-insert', action: 'deny', ops: ['insert'], collections: ['audit'] }], default: 'allow' } }] },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id;
  rs.members[0].resetCounts();
  const n = 7;
  for (let i = 0; i < n; i++) await audit.insertOne({ i });
  assert.equal(rs.members[0].count('insert'), n, 'each insert reached the upstream once');
  assert.equal(await audit.countDocuments({}), n, 'the client was served by v1: every insert written');
  const diffs = (await call('GET', `/${id}/diffs`)).body;
  assert.equal(diffs.by_kind.outcome, n, JSON.stringify(diffs));
  assert.equal(diffs.diverged, n);
  const d = diffs.diffs[0];
  assert.equal(d.kind, 'outcome');
  assert.equal(d.op, 'insert');
  assert.equal(d.baseline, 'forward');
  assert.equal(d.candidate, 'reject:13');
  // A drop both deny is no divergence.
  await assert.rejects(audit.drop(), (e: unknown) => e instanceof MongoServerError && e.code === 13);
  assert.equal((await call('GET', `/${id}/diffs`)).body.diverged, n);
});

test('the shadow\'s cost shows as pipeline=candidate in /api/profile while no client is served by the candidate', async () => {
  const { proxy, client, call } = await start({
    profiling: { port: 0, enabled: true },
    pipeline: { request: ['filter'], response: ['transform'] },
    steps: { filter: { config: { rules: [], default: 'allow' } }, transform: { config: { response: [REDACT_SSN] } } },
  });
  const coll = client.db('app').collection('costs');
  await coll.insertOne({ ssn: 'x', email: 'y' });
  const created = await call('POST', '', {
    mode: 'shadow', shadow_pct: 100, auto_promote: false, stages: HOLD,
    candidate_config: { steps: [{ type: 'transform', config: { response: [REDACT_SSN, REDACT_EMAIL] } }] },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  for (let i = 0; i < 20; i++) await coll.findOne({});
  const candidate = await (await fetch(`${proxy.profilingUrl}/api/profile?pipeline=candidate`)).json() as any;
  assert.ok(candidate.total_requests >= 20, JSON.stringify(candidate));
  const graphs = (await (await fetch(`${proxy.profilingUrl}/api/profile/graphs`)).json() as any).graphs;
  assert.ok(graphs.some((g: any) => g.pipeline === 'candidate' && g.requests >= 20), JSON.stringify(graphs));
  const steps = candidate.steps.map((s: any) => `${s.name}/${s.phase}`);
  assert.ok(steps.includes('wasm:transform/response') && steps.includes('wasm:filter/request'), steps.join(','));
  const folded = await (await fetch(`${proxy.profilingUrl}/api/profile/flamegraph?pipeline=candidate&format=folded`)).text();
  assert.match(folded, /wasm:transform/, 'the flame graph of the candidate');
  // No client was served by the candidate: its arm served nothing.
  const status = (await call('GET', `/${created.body.canary_id}`)).body;
  assert.equal(status.traffic_pct, 0);
  assert.equal(proxy.canary!.status(created.body.canary_id).traffic_pct, 0);
  assert.equal(status.shadow.sampled >= 20, true);
});

test('a shadow stage promotes into the first exposed stage by rule', async () => {
  const { client, call } = await start({
    pipeline: { request: [], response: ['transform'] }, steps: { transform: { config: { response: [REDACT_SSN] } } },
  });
  const coll = client.db('app').collection('promote');
  await coll.insertOne({ ssn: 'x' });
  const created = await call('POST', '', {
    mode: 'shadow', shadow_pct: 100, auto_promote: true,
    // v2: the same edits written again (a new version, the same behaviour).
    candidate_config: { steps: [{ type: 'transform', config: { response: [{ ...REDACT_SSN, replacement: '***' }] } }] },
    stages: [{ traffic_pct: 0, min_duration: '0', min_requests: 10 }, { traffic_pct: 50, min_duration: '1h', min_requests: 1_000_000 },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { check_interval: '250ms', min_window_requests: 5, divergence_rate: 0.1 },
    auto_promote_rules: { max_divergence_rate: 0, max_latency_p95_delta_ms: 1000 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id;
  let stop = false;
  const load = (async () => { while (!stop) await coll.findOne({}); })();
  try {
    await until('promotion into stage 2', async () => (await call('GET', `/${id}`)).body.current_stage === 2, 20_000);
  } finally {
    stop = true;
    await load;
  }
  const st = (await call('GET', `/${id}`)).body;
  assert.equal(st.traffic_pct, 50);
  assert.equal(st.shadow.shadow_pct, 0, 'the exposed stage ends the shadowing');
  assert.equal(st.shadow.diverged, 0);
  const promoted = (await call('GET', `/${id}/history`)).body.history.find((e: any) => e.event === 'promoted');
  assert.match(promoted.message, /automatic/);
});

test('a divergence rule rolls a shadow canary back; canary.diverged is sent, once per interval', async () => {
  const sink = new RecordingEventSink();
  const { client, call } = await start({
    pipeline: { request: [], response: ['transform'] }, steps: { transform: { config: { response: [REDACT_SSN] } } },
  }, sink);
  const coll = client.db('app').collection('rollback');
  await coll.insertOne({ ssn: 'x', email: 'y' });
  const created = await call('POST', '', {
    mode: 'shadow', shadow_pct: 100, auto_promote: true, stages: HOLD,
    candidate_config: { steps: [{ type: 'transform', config: { response: [REDACT_SSN, REDACT_EMAIL] } }] },
    rollback_rules: { check_interval: '250ms', sustained_duration: '500ms', min_window_requests: 5, divergence_rate: 0.5 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id;
  let stop = false;
  const load = (async () => { while (!stop) await coll.findOne({}); })();
  try {
    await until('rollback', async () => (await call('GET', `/${id}`)).body.status === 'rolled_back', 20_000);
  } finally {
    stop = true;
    await load;
  }
  const rep = (await call('GET', `/${id}/report`)).body;
  assert.equal(rep.triggered_by, 'automatic');
  assert.match(rep.reason, /divergence_rate 1 > 0\.5/);
  assert.equal(rep.triggering_rules[0].rule, 'divergence_rate');
  const diverged = sink.events.filter((e) => e.event.type === 'canary.diverged');
  assert.equal(diverged.length, 1, 'one canary.diverged within diverged_event_interval (1m)');
  const ev = diverged[0].event;
  assert.match(ev.id, new RegExp(`^${id}:diverged:\\d+:canary\\.diverged$`));
  assert.equal(ev.divergence!.by_kind.reply, ev.divergence!.diverged);
  assert.deepEqual(ev.divergence!.latest[0].paths, ['cursor.firstBatch.0.email']);
  // After the rollback nothing more is shadowed.
  const sampled = (await call('GET', `/${id}/diffs`)).body.sampled;
  await coll.findOne({});
  assert.equal((await call('GET', `/${id}/diffs`)).body.sampled, sampled);
});

test('a slow candidate does not delay the baseline\'s reply: it runs after the reply is written, and its time shows in the profile', async (t) => {
  // The proxy in its own process (the client's event loop must not share the candidate's).
  const SPIN_US = 300_000;
  const spinWasm = await fixture('spin');
  const dir = mkdtempSync(join(tmpdir(), 'shadow-slow-'));
  dirs.push(dir);
  const [port, control, profiling] = [await freePort(), await freePort(), await freePort()];
  const config = join(dir, 'proxy.json');
  writeFileSync(config, JSON.stringify({
    listen: `127.0.0.1:${port}`, log: { level: 'info', format: 'json' }, profiling: { port: profiling, enabled: true },
    control_plane: { port: control, tokens: [TOKEN] }, canary: { data_dir: join(dir, 'canary'), plugin_dirs: ['build/test-plugins'] },
    pipeline: { request: [], response: [] },
  }));
  let out = '';
  const child = spawn(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'serve', '--config', config, '--workers', '1'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => { out += d; });
  child.stderr!.on('data', (d: Buffer) => { out += d; });
  t.after(async () => {
    child.kill('SIGTERM');
    if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
  });
  await until(() => `the proxy: ${out}`, () => out.includes('is ready') || child.exitCode !== null, 60_000);
  const call = api(`http://127.0.0.1:${control}`);
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, { maxPoolSize: 1 });
  clients.push(client);
  const coll = client.db('app').collection('slow');
  await coll.insertOne({ a: 1 });
  const created = await call('POST', '', {
    mode: 'shadow', shadow_pct: 100, auto_promote: false, stages: HOLD,
    candidate_config: { steps: [{ type: 'spin', plugin_id: spinWasm, config: { us: SPIN_US } }] },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const took: number[] = [];
  for (let i = 0; i < 3; i++) {
    // Idle first, so the previous request's shadow is done: what is timed is this request alone.
    await new Promise((r) => setTimeout(r, (2 * SPIN_US) / 1000));
    const t0 = performance.now();
    await coll.findOne({});
    took.push(performance.now() - t0);
  }
  console.log(`reply times with a ${SPIN_US / 1000} ms candidate: ${took.map((x) => x.toFixed(1)).join(', ')} ms`);
  // The candidate spent SPIN_US in its request phase on each of them, after the reply was written.
  const profile = await (await fetch(`http://127.0.0.1:${profiling}/api/profile?pipeline=candidate`)).json() as any;
  const spin = profile.steps.find((x: any) => x.name === 'wasm:spin');
  assert.ok(spin !== undefined && spin.invocations >= 3 && spin.p50_latency_us >= SPIN_US * 0.95, JSON.stringify(profile));
  assert.ok(took.every((ms) => ms < SPIN_US / 1000), `reply times ${took.map((x) => x.toFixed(1)).join(', ')} ms, each under the ` +
    `candidate's ${SPIN_US / 1000} ms`);
  const diffs = (await call('GET', `/${created.body.canary_id}/diffs`)).body;
  assert.ok(diffs.sampled >= 3 && diffs.diverged === 0, JSON.stringify(diffs));
});

test('shadow_upstream_reads: a read whose command differs is sent once more for the candidate and the answers compared; a write never', async (t) => {
  const set = await DevReplicaSet.start(1, 'rs1');
  const { client, call } = await start({ upstream: { uri: set.uri([0]), connect_timeout_ms: 2000 }, pipeline: { request: [], response: [] } });
  t.after(() => set.close());
  const coll = client.db('app').collection('reads');
  await coll.insertMany([{ n: 1 }, { n: 2 }, { n: 3 }]);
  const created = await call('POST', '', {
    mode: 'shadow', shadow_pct: 100, shadow_upstream_reads: true, auto_promote: false, stages: HOLD,
    // v2: finds limited to one document, inserts tagged.
    candidate_config: { steps: [{ type: 'transform', config: { request: [{ op: 'set', path: 'limit', value: 1, ops: ['find'] },
      { op: 'set', path: 'comment', value: 'v2', ops: ['insert'] }] } }] },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id;
  set.members[0].resetCounts();
  for (let i = 0; i < 4; i++) assert.equal((await coll.find({}).toArray()).length, 3, 'the client gets v1\'s answer');
  await coll.insertOne({ n: 4 });
  await until('the candidate\'s reads', async () => (await call('GET', `/${id}/diffs`)).body.diffs.every((d: any) => d.reply?.status !== 'pending'));
  assert.equal(set.members[0].count('find'), 4 + 4, 'each find once for the client, once for the candidate');
  assert.equal(set.members[0].count('insert'), 1, 'the insert once');
  const diffs = (await call('GET', `/${id}/diffs`)).body;
  assert.equal(diffs.upstream_reads, true);
  assert.equal(diffs.reads, 4);
  assert.deepEqual(diffs.by_kind, { outcome: 0, request: 5, reply: 0 });
  const finds = diffs.diffs.filter((d: any) => d.op === 'find');
  assert.equal(finds.length, 4);
  for (const d of finds) {
    assert.deepEqual(d.paths, [{ path: 'limit', change: 'added', candidate_type: 'int' }]);
    assert.equal(d.reply.status, 'fetched');
    assert.deepEqual(d.reply.paths.map((p: any) => `${p.path} ${p.change}`), ['cursor.firstBatch.1 removed', 'cursor.firstBatch.2 removed']);
  }
  const insert = diffs.diffs.find((d: any) => d.op === 'insert');
  assert.deepEqual(insert.paths.map((p: any) => p.path), ['comment']);
  assert.equal(insert.reply, null, 'a write is never fetched');
});

test('proxy canary start --shadow <pct> [--shadow-upstream-reads]: a shadow canary with a shadow stage before the default stages', async () => {
  const { proxy, call } = await start({});
  const dir = mkdtempSync(join(tmpdir(), 'shadow-cli-'));
  dirs.push(dir);
  const file = join(dir, 'candidate.json');
  writeFileSync(file, JSON.stringify({ steps: [{ type: 'logging', config: {} }] }));
  const cli = await promisify(execFile)(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'canary', 'start', '--pipeline', 'default',
    '--candidate-config', file, '--shadow', '25', '--shadow-upstream-reads'], {
    env: { ...process.env, PROXY_CONTROL_URL: proxy.controlPlaneUrl!, PROXY_CONTROL_TOKEN: TOKEN }, encoding: 'utf8',
  });
  assert.match(cli.stdout, /stage 1, 0% to the candidate, 25% shadowed/);
  const id = /canary (c-[0-9a-f]+) started/.exec(cli.stdout)![1];
  const st = (await call('GET', `/${id}`)).body;
  assert.equal(st.mode, 'shadow');
  assert.equal(st.shadow.shadow_pct, 25);
  assert.equal(st.shadow.upstream_reads, true);
  assert.deepEqual(st.stages.map((s: any) => s.traffic_pct), [0, 5, 25, 50, 100]);
});
