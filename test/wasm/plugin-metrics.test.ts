// Plugin metrics: label names declared at definition, values per observation, one Prometheus
// family per name with the graph's labels, bounded label sets (overflow to "other", counted).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { PluginMetricRegistry, MetricKind, MAX_LABEL_SETS, MAX_LABEL_VALUE_CHARS, MAX_METRIC_LABELS } from '../../runtime/wasm/index.ts';
import { encodeLabelKey, decodeLabelKey, OVERFLOW_METRIC, type MetricBinding } from '../../runtime/wasm/plugin-metrics.ts';
import { PluginHarness } from '../../sdk/testing/index.ts';
import { fixture } from './fixtures.ts';

function registry() {
  const r = new Registry();
  return { r, m: new PluginMetricRegistry(r) };
}
const bind = (b: MetricBinding | string): MetricBinding => {
  assert.equal(typeof b, 'object', String(b));
  return b as MetricBinding;
};

test('label names are checked at definition; a name keeps its kind', () => {
  const { m } = registry();
  assert.match(m.define(MetricKind.Counter, 'requests_total', [], 'p', 'baseline') as string, /proxy_plugin_/);
  assert.match(m.define(MetricKind.Counter, OVERFLOW_METRIC, [], 'p', 'baseline') as string, /host's/);
  assert.match(m.define(MetricKind.Counter, 'proxy_plugin_a', ['Op'], 'p', 'baseline') as string, /label name "Op"/);
  assert.match(m.define(MetricKind.Counter, 'proxy_plugin_a', ['pipeline'], 'p', 'baseline') as string, /reserved/);
  assert.match(m.define(MetricKind.Counter, 'proxy_plugin_a', ['le'], 'p', 'baseline') as string, /reserved/);
  assert.match(m.define(MetricKind.Counter, 'proxy_plugin_a', ['a', 'a'], 'p', 'baseline') as string, /twice/);
  assert.match(m.define(MetricKind.Counter, 'proxy_plugin_a', ['a', 'b', 'c', 'd', 'e'].slice(0, MAX_METRIC_LABELS + 1), 'p', 'baseline') as string,
    /at most 4/);
  bind(m.define(MetricKind.Counter, 'proxy_plugin_a', ['op'], 'p', 'baseline'));
  assert.match(m.define(MetricKind.Gauge, 'proxy_plugin_a', ['op'], 'p', 'baseline') as string, /already defined as a counter/);
});

test('one family per name: series by label values, with pipeline_id and pipeline; values escaped', async () => {
  const { r, m } = registry();
  const base = bind(m.define(MetricKind.Counter, 'proxy_plugin_hits_total', ['op', 'coll'], 'p', 'baseline'));
  const cand = bind(m.define(MetricKind.Counter, 'proxy_plugin_hits_total', ['op', 'coll'], 'p', 'candidate'));
  base.series(encodeLabelKey(['find', 'users']))!.inc(2);
  base.series(encodeLabelKey(['find', 'users']))!.inc(1);
  base.series(encodeLabelKey(['find', 'a"b\\c\nd']))!.inc(1);
  cand.series(encodeLabelKey(['find', 'users']))!.inc(5);
  assert.equal(base.series(encodeLabelKey(['find'])), null, 'one value for two labels');
  const text = await r.metrics();
  assert.equal((text.match(/^# TYPE proxy_plugin_hits_total counter$/gm) ?? []).length, 1);
  assert.match(text, /^proxy_plugin_hits_total\{op="find",coll="users",pipeline_id="p",pipeline="baseline"\} 3$/m);
  assert.match(text, /^proxy_plugin_hits_total\{op="find",coll="users",pipeline_id="p",pipeline="candidate"\} 5$/m);
  assert.match(text, /^proxy_plugin_hits_total\{op="find",coll="a\\"b\\\\c\\nd",pipeline_id="p",pipeline="baseline"\} 1$/m);
  assert.equal(m.value('proxy_plugin_hits_total', 'p', 'baseline'), 4);
  assert.equal(m.value('proxy_plugin_hits_total', 'p', 'candidate'), 5);
});

test('label values are cut to MAX_LABEL_VALUE_CHARS; a cut key names its set but is not to be remembered', () => {
  const { m } = registry();
  const b = bind(m.define(MetricKind.Gauge, 'proxy_plugin_g', ['v'], 'p', 'baseline'));
  const long = 'x'.repeat(MAX_LABEL_VALUE_CHARS + 10);
  const raw = String.fromCharCode(long.length) + long;
  assert.deepEqual(decodeLabelKey(raw, 1), [long]);
  const s1 = b.series(raw)!;
  assert.equal(b.cacheable, false);
  const s2 = b.series(encodeLabelKey(['x'.repeat(MAX_LABEL_VALUE_CHARS)]))!;
  assert.equal(b.cacheable, true);
  assert.equal(s1, s2);
});

test(`past ${MAX_LABEL_SETS} label sets per graph, observations go to "other" and are counted`, async () => {
  const { r, m } = registry();
  const b = bind(m.define(MetricKind.Histogram, 'proxy_plugin_lat', ['coll'], 'p', 'baseline'));
  for (let i = 0; i < MAX_LABEL_SETS; i++) b.series(encodeLabelKey([`c${i}`]))!.record(1);
  const over = b.series(encodeLabelKey(['late']))!;
  assert.equal(b.cacheable, false);
  over.record(3);
  b.series(encodeLabelKey(['later']))!.record(4);
  b.series(encodeLabelKey(['c0']))!.record(1); // a known set still has its own series
  const other = bind(m.define(MetricKind.Histogram, 'proxy_plugin_lat', ['coll'], 'p', 'candidate'));
  other.series(encodeLabelKey(['fresh']))!.record(1); // the cap is per graph
  const text = await r.metrics();
  assert.match(text, /^proxy_plugin_lat_count\{coll="other",pipeline_id="p",pipeline="baseline"\} 2$/m);
  assert.match(text, /^proxy_plugin_lat_count\{coll="c0",pipeline_id="p",pipeline="baseline"\} 2$/m);
  assert.match(text, /^proxy_plugin_lat_count\{coll="fresh",pipeline_id="p",pipeline="candidate"\} 1$/m);
  assert.match(text, new RegExp(`^${OVERFLOW_METRIC}\\{metric="proxy_plugin_lat",pipeline_id="p",pipeline="baseline"\\} 2$`, 'm'));
  assert.equal((text.match(/^proxy_plugin_lat_count\{[^}]*pipeline="baseline"/gm) ?? []).length, MAX_LABEL_SETS + 1);
});

test('SDK: labelled counters, gauges and histograms; the cap and a refused label name, through a plugin', async () => {
  const h = await PluginHarness.load(await fixture('labels'));
  h.request({ find: 'users', $db: 'app' });
  h.request({ find: 'users', $db: 'app' });
  h.request({ insert: 'orders', documents: [], $db: 'shop' });
  for (let i = 0; i < MAX_LABEL_SETS + 5; i++) h.request({ spray: 'x', $db: 'app' }, { requestId: i });
  const text = await h.metrics();
  const g = 'pipeline_id="default",pipeline="baseline"';
  assert.match(text, new RegExp(`^proxy_plugin_test_labelled_total\\{op="find",coll="users",${g}\\} 2$`, 'm'));
  assert.match(text, new RegExp(`^proxy_plugin_test_labelled_total\\{op="insert",coll="orders",${g}\\} 1$`, 'm'));
  assert.match(text, new RegExp(`^proxy_plugin_test_size_bytes\\{db="shop",${g}\\} \\d+$`, 'm'));
  assert.match(text, new RegExp(`^proxy_plugin_test_latency_us_count\\{op="find",${g}\\} 2$`, 'm'));
  assert.match(text, new RegExp(`^proxy_plugin_test_plain_total\\{${g}\\} 6$`, 'm'));
  // 2 sets before the spray, so 998 spray sets fit and 7 overflow
  assert.match(text, new RegExp(`^proxy_plugin_test_labelled_total\\{op="other",coll="other",${g}\\} 7$`, 'm'));
  assert.match(text, new RegExp(`^${OVERFLOW_METRIC}\\{metric="proxy_plugin_test_labelled_total",${g}\\} 7$`, 'm'));
  assert.doesNotMatch(text, /op="",/, 'a labelled metric has no empty label set unless it is used');
  const bad = await PluginHarness.load(await fixture('labels'), { config: { bad: 'Bad-Name' }, pipelineId: 'bad' }).catch((e: unknown) => e);
  assert.ok(bad instanceof Error && /metric refused .*proxy_plugin_test_bad_total/.test(bad.message), String(bad));
});
