// StepHost's clock sharing: within one phase callback, the kv store's TTLs and expiry checks take
// the clock reading the callback already made (proxy_now, elapsed_ns) instead of reading the clock
// again per kv call; every callback (and configure) starts without one. Also the properties a plugin
// reads outside a request: the log level and the kv store's cap.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { KvStore, PluginMetricRegistry, type HostExchange, type HostLog, type PluginServices } from '../../runtime/wasm/index.ts';
import { StepHost } from '../../runtime/wasm/step-host.ts';
import { Property } from '../../runtime/wasm/abi.ts';

const logger: HostLog = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };
function services(kv: KvStore): PluginServices {
  return {
    step: 'wasm:clock', pipelineId: 'p', variant: 'baseline', logger, kv, metrics: new PluginMetricRegistry(new Registry()),
    rebuilds: { inc() {} }, subop: null, fuel: 1_000_000,
  };
}
/** Lets the clock move on (synchronously: a callback does not yield). */
function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* wait */ }
}
// The clock and kv functions read no field of the exchange.
const ex = { startedAt: performance.now() } as HostExchange;
const v = new Uint8Array([1, 2, 3]);

test('step host: a TTL set after the callback read the clock counts from that reading', () => {
  const kv = new KvStore(1 << 16);
  const host = new StepHost(services(kv));
  host.begin(ex);
  const readingMs = host.nowNs() / 1e6;
  spin(5);
  assert.equal(host.kvSet('k', v, 1000), true);
  assert.deepEqual(kv.get('k', readingMs + 999.999), v, 'live until the reading + TTL');
  assert.equal(kv.get('k', readingMs + 1000), undefined, 'expired at the reading + TTL, not 5 ms later');
  // proxy_now itself always reads the clock
  assert.ok(host.nowNs() / 1e6 >= readingMs + 5);
  host.end();
});

test('step host: each callback starts without a reading (the store reads the clock), and elapsed_ns gives one too', () => {
  const kv = new KvStore(1 << 16);
  const host = new StepHost(services(kv));
  host.begin(ex);
  const firstMs = host.nowNs() / 1e6;
  host.end();
  spin(5);
  host.begin(ex);
  const before = performance.now();
  assert.equal(host.kvSet('k', v, 1000), true);
  host.end();
  assert.deepEqual(kv.get('k', before + 999.999), v, 'counted from a reading taken in this callback');
  assert.ok(before >= firstMs + 5);
  // the elapsed_ns property's clock reading serves the kv store like proxy_now's
  host.begin(ex);
  const elapsedNs = host.number(Property.ElapsedNs);
  assert.equal(host.kvSet('e', v, 1000), true);
  host.end();
  const readingMs = ex.startedAt + elapsedNs / 1e6;
  assert.deepEqual(kv.get('e', readingMs + 999.99), v);
  assert.equal(kv.get('e', readingMs + 1000.01), undefined);
});

test('step host: the LogLevel property is the lowest level the step\'s logger writes (0, every level, when it does not say), outside a callback too', () => {
  const kv = new KvStore(1 << 16);
  assert.equal(new StepHost(services(kv)).number(Property.LogLevel), 0);
  for (const [level, n] of [['trace', 0], ['info', 2], ['warn', 3], ['error', 4]] as const) {
    const host = new StepHost({ ...services(kv), logger: { ...logger, level } });
    assert.equal(host.number(Property.LogLevel), n, level);
    assert.equal(host.property(Property.LogLevel), String(n), level);
  }
});

test('step host: the KvMaxBytes property is the cap of the step\'s kv store, outside a callback too', () => {
  const host = new StepHost(services(new KvStore(123_456)));
  assert.equal(host.number(Property.KvMaxBytes), 123_456);
  assert.equal(host.property(Property.KvMaxBytes), '123456');
});
