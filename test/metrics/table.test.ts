// The metric table (runtime/metrics/table.ts) is the one declaration of every metric: a running
// proxy with every optional part (a mongos list upstream, tracing, a control plane with its
// notifier, profiling) exposes exactly the table's metrics on /metrics, each with the table's
// type, help and label names; the profiler's metrics only on the profiling endpoint; and
// docs/http-api.md lists each one with its type and labels.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { MongoClient } from 'mongodb';
import { DevMongos } from '../../runtime/devdb/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { METRICS, newServerStats, type MetricName, type MetricSpec } from '../../runtime/metrics/index.ts';
import { MAX_LABEL_SETS } from '../../runtime/wasm/abi.ts';

const ADMIN_TOKEN = 'admin-token-0123456789';
let routers: DevMongos[];
let proxy: RunningProxy;
let dir: string;
let adminText: string;
let profilingText: string;

before(async () => {
  routers = await DevMongos.startMany(2);
  dir = mkdtempSync(join(tmpdir(), 'metric-table-'));
  proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    upstream: { uri: `mongodb://${routers.map((r) => r.address).join(',')}/`, connect_timeout_ms: 2000 },
    admin: { listen: '127.0.0.1:0', token: ADMIN_TOKEN },
    profiling: { port: 0, enabled: true },
    // Nothing listens there: spans fail to export, which is all the tracing metrics need.
    telemetry: { otlp_endpoint: 'http://127.0.0.1:9/v1/traces' },
    control_plane: { port: 0, tokens: ['control-token-0123456789'] },
    canary: { data_dir: join(dir, 'canary') },
    pipeline: { request: ['filter', 'logging'], response: [] },
    steps: { filter: { config: { rules: [{ name: 'no-drop', action: 'deny', ops: ['drop'] }], default: 'allow' } }, logging: { config: { sample_rate: 0 } } },
  }, null));
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 10_000 });
  try {
    await client.db('m').collection('c').findOne({});
    // Rejected by the filter step: proxy_pipeline_rejections_total gets a series.
    await assert.rejects(client.db('m').collection('c').drop());
  } finally {
    await client.close();
  }
  adminText = await (await fetch(`${proxy.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
  profilingText = await (await fetch(`${proxy.profilingUrl}/metrics`)).text();
});

after(async () => {
  await proxy?.close();
  for (const r of routers ?? []) await r.server!.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

interface Family { type: string; help: string; labelSets: Set<string> }

/** Families of an exposition by name: `# TYPE`, `# HELP`, and the label names of each sample. */
function families(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  const family = (name: string) => {
    let f = out.get(name);
    if (f === undefined) out.set(name, f = { type: '', help: '', labelSets: new Set() });
    return f;
  };
  let current = '';
  for (const line of text.split('\n')) {
    let m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m !== null) { family(m[1]!).type = m[2]!; current = m[1]!; continue; }
    m = /^# HELP (\S+) (.*)$/.exec(line);
    if (m !== null) { family(m[1]!).help = m[2]!; continue; }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$/.exec(line);
    if (m === null) continue;
    assert.ok(m[1]!.startsWith(current), `sample ${m[1]} belongs to the family ${current} above it`);
    const names = m[2] === undefined ? [] : [...m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)].map((x) => x[1]!);
    family(current).labelSets.add(names.filter((n) => n !== 'le' && n !== 'quantile').join(','));
  }
  return out;
}

/** Families this proxy has no series of (no trap, no label-set overflow): prom-client prints their
 *  HELP and TYPE only; their label names are the table's by construction (promOptions). */
const UNSAMPLED = new Set<string>(['proxy_step_errors_total', 'proxy_step_instance_rebuilds_total', 'proxy_plugin_label_overflow_total']);

/** Names a plugin defines (`proxy_plugin_*` other than the host's): not the table's. */
const pluginDefined = (name: string) => name.startsWith('proxy_plugin_') && !(name in METRICS);

function checkAgainstTable(text: string, expected: MetricName[], where: string): void {
  const found = families(text);
  assert.deepEqual([...found.keys()].filter((n) => !pluginDefined(n)).sort(), [...expected].sort(), `${where}: the families are the table's`);
  for (const name of expected) {
    const spec: MetricSpec = METRICS[name];
    const f = found.get(name)!;
    assert.equal(f.type, spec.type, `${where}: ${name} type`);
    assert.equal(f.help, spec.help, `${where}: ${name} help`);
    if (UNSAMPLED.has(name)) {
      assert.equal(f.labelSets.size, 0, `${where}: ${name} has no series here`);
      continue;
    }
    assert.deepEqual([...f.labelSets], [spec.labels.join(',')], `${where}: ${name} label names`);
  }
}

/** The table's metrics a proxy of one process exposes: all but the primary's of a proxy with workers (test/cluster/workers.test.ts). */
const ONE_PROCESS = (Object.keys(METRICS) as MetricName[]).filter((n) => METRICS[n].owner !== 'machine');

test('the admin API\'s /metrics is every table metric but the profiler\'s and the primary\'s, with the table\'s type, help and labels', () => {
  const expected = ONE_PROCESS.filter((n) => METRICS[n].owner !== 'profiler');
  checkAgainstTable(adminText, expected, 'admin /metrics');
});

test('the profiling endpoint\'s /metrics is every table metric but the primary\'s, with the table\'s type, help and labels', () => {
  checkAgainstTable(profilingText, ONE_PROCESS, 'profiling /metrics');
});

test('one registry: the plugin host\'s metrics and the proxy\'s own are in the registry every /metrics reads', async () => {
  assert.equal(proxy.pipelines.host.registry, proxy.metrics);
  const names = [...families(await proxy.metrics.metrics()).keys()].sort();
  assert.deepEqual(names, [...families(adminText).keys()].sort());
  assert.ok(names.includes('proxy_wire_requests_total') && names.includes('proxy_step_errors_total') && names.includes('proxy_notifications_pending'));
});

test('the server\'s counters are the table\'s stat fields, each counted in /metrics', () => {
  const stats = newServerStats();
  const fromTable = Object.values(METRICS as Record<string, MetricSpec>).flatMap((m) => [
    ...(m.stat === undefined ? [] : [m.stat]), ...(m.statByLabel === undefined ? [] : Object.values(m.statByLabel))]);
  assert.deepEqual(Object.keys(stats), fromTable);
  assert.deepEqual(Object.keys(proxy.server.stats), fromTable);
  assert.ok(proxy.server.stats.requests > 0);
  const requests = /^proxy_wire_requests_total (\d+)$/m.exec(adminText);
  assert.ok(requests !== null && Number(requests[1]) > 0, 'proxy_wire_requests_total carries stats.requests');
});

test('the server\'s counters are one fast-properties object (not a dictionary) before and after counting', () => {
  // V8's own answer (%HasFastProperties), in a child process started with --allow-natives-syntax.
  const script = `
    import { newServerStats } from ${JSON.stringify(new URL('../../runtime/metrics/index.ts', import.meta.url).href)};
    const a = newServerStats(), b = newServerStats();
    for (const k of Object.keys(b)) b[k]++;
    console.log(JSON.stringify([%HasFastProperties(a), %HasFastProperties(b), %HaveSameMap(a, b)]));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim()), [true, true, true]);
});

test('the overflow counter\'s help states the ABI\'s label-set cap', () => {
  assert.ok(METRICS.proxy_plugin_label_overflow_total.help.includes(`(${MAX_LABEL_SETS} per metric per graph)`));
});

test('docs/http-api.md lists every table metric with its type and labels, and none the table lacks', () => {
  const doc = readFileSync('docs/http-api.md', 'utf8');
  const section = doc.slice(doc.indexOf('### Metrics'), doc.indexOf('\n## ', doc.indexOf('### Metrics')));
  const rows = new Map<string, { type: string; labels: string }>();
  for (const m of section.matchAll(/^\| `(proxy_[a-z0-9_*]+)(?:\{([a-z_,]*)\})?` \| ([a-z, ]+) \|/gm)) {
    assert.ok(!rows.has(m[1]!), `${m[1]} is listed once`);
    rows.set(m[1]!, { labels: m[2] ?? '', type: m[3]! });
  }
  rows.delete('proxy_plugin_*');
  assert.deepEqual([...rows.keys()].sort(), Object.keys(METRICS).sort());
  for (const [name, row] of rows) {
    const spec: MetricSpec = METRICS[name as MetricName];
    assert.equal(row.type, spec.type, `${name}: type in the docs`);
    assert.equal(row.labels, spec.labels.join(','), `${name}: labels in the docs`);
  }
});

test('no document names a metric the table lacks (plugin-defined proxy_plugin_* aside)', () => {
  const unknown: string[] = [];
  for (const f of readdirSync('docs').filter((n) => n.endsWith('.md'))) {
    const text = readFileSync(join('docs', f), 'utf8');
    for (const m of text.matchAll(/\bproxy_[a-z0-9_]+?_(?:total|seconds|us|pending|queued|connections|idle|waiting|servers|cursors|transactions)(?:_bucket|_sum|_count)?\b/g)) {
      const name = m[0].replace(/_(?:bucket|sum|count)$/, '');
      if (!(name in METRICS) && !name.startsWith('proxy_plugin_')) unknown.push(`docs/${f}: ${m[0]}`);
    }
  }
  assert.deepEqual(unknown, []);
});
