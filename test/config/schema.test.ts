import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as v from 'valibot';
import { ProxyConfigSchema, defaultConfig, schemaKeys } from '../../runtime/config/schema.ts';
import { DEFAULT_STAGES } from '../../runtime/config/canary-schema.ts';
import { MAX_TIMER_MS } from '../../runtime/config/expects.ts';
import { parseConfig, ConfigError } from '../../runtime/config/index.ts';

test('an empty object takes every default', () => {
  assert.deepEqual(defaultConfig(), {
    listen: '127.0.0.1:27018',
    workers: 'auto',
    upstream: {
      pool_size: 100,
      min_idle: 0,
      max_idle_time_ms: 60000,
      connect_timeout_ms: 5000,
      wait_queue_timeout_ms: 10000,
      request_timeout_ms: 0,
      srv_rescan_interval_ms: 60000,
      heartbeat_ms: 10000,
      local_threshold_ms: 15,
      server_selection_timeout_ms: 10000,
    },
    devdb: { port: 0 },
    clients: { max_connections: 0, max_pending_reply_bytes: 16777216, max_queued_requests: 64, max_queued_request_bytes: 16777216 },
    shutdown: { drain_timeout_ms: 10000 },
    worker_heartbeat: { interval_ms: 1000, timeout_ms: 10000 },
    compression: ['snappy', 'zlib', 'zstd'],
    zlib_level: -1,
    log: { level: 'info', format: 'json', ring_lines: 1000 },
    pipeline: { id: 'default', request: [], response: [] },
    steps: {},
    canary: {
      stages: DEFAULT_STAGES, auto_promote: false, data_dir: 'data/canary', baseline_grace_period: '15m', warning_share: 0.8,
      max_samples: 10000, judge: { enabled: false, confidence: 0.98 }, plugin_dirs: [],
      shadow: { ignore_paths: ['$clusterTime', 'operationTime'], show_values: false, max_diffs: 100, diverged_event_interval: '1m',
        upstream_reads_concurrency: 4 },
    },
    rollback_rules: { error_rate_delta_pct: 5, latency_p95_delta_ms: 100, sustained_duration: '20s', check_interval: '5s', custom_metrics: [],
      min_window_requests: 20 },
    auto_promote_rules: { min_duration: '0', min_requests: 0, max_error_rate_delta_pct: 1, max_latency_p95_delta_ms: 20 },
    notifications: { channels: [], timeout_ms: 10000, max_attempts: 8, initial_backoff_ms: 1000, max_backoff_ms: 60000 },
    fleet: { store: 'sqlite', endpoints: [], prefix: '/pipeline-proxy', lease_ttl_s: 10, evidence_quorum_pct: 50, evidence_timeout_ms: 2000,
      artifact_max_bytes: 524288, artifact_grace: '10m' },
  });
});

test('a step entry takes its defaults', () => {
  const cfg = v.parse(ProxyConfigSchema, { steps: { redact: { module: 'r.wasm' } } });
  assert.deepEqual(cfg.steps.redact, { module: 'r.wasm', config: {}, max_memory_pages: 256 });
});

test('listen refuses a port above 65535 and accepts IPv6 brackets', () => {
  assert.equal(v.safeParse(ProxyConfigSchema, { listen: 'localhost:65536' }).success, false);
  assert.equal(v.safeParse(ProxyConfigSchema, { listen: 'localhost' }).success, false);
  assert.equal(v.safeParse(ProxyConfigSchema, { listen: '[::1]:0' }).success, true);
});

test('step identifiers must match the documented pattern', () => {
  assert.equal(v.safeParse(ProxyConfigSchema, { pipeline: { request: ['Cache'] } }).success, false);
  assert.equal(v.safeParse(ProxyConfigSchema, { pipeline: { request: ['wasm:'] } }).success, false);
  assert.equal(v.safeParse(ProxyConfigSchema, { pipeline: { request: ['cache', 'rate_limit'] } }).success, true);
});

test('every key has a description', () => {
  for (const key of schemaKeys()) assert.ok(key.description.length > 0, `${key.path} has no description`);
});

test('a *_ms key that sets a timer refuses a delay past what a Node timer can wait (2^31 − 1 ms: a longer one fires after 1 ms)', () => {
  const keys: [string, string][] = [
    ['upstream', 'max_idle_time_ms'], ['upstream', 'connect_timeout_ms'], ['upstream', 'wait_queue_timeout_ms'], ['upstream', 'request_timeout_ms'],
    ['upstream', 'srv_rescan_interval_ms'], ['upstream', 'heartbeat_ms'], ['upstream', 'server_selection_timeout_ms'],
    ['shutdown', 'drain_timeout_ms'], ['notifications', 'timeout_ms'], ['notifications', 'initial_backoff_ms'], ['notifications', 'max_backoff_ms'],
  ];
  for (const [section, key] of keys) {
    const at = (ms: number) => ({ [section]: { [key]: ms, ...(key === 'initial_backoff_ms' ? { max_backoff_ms: MAX_TIMER_MS } : {}) } });
    assert.equal((parseConfig(at(MAX_TIMER_MS), null) as unknown as Record<string, Record<string, number>>)[section]![key], MAX_TIMER_MS, key);
    assert.throws(() => parseConfig(at(MAX_TIMER_MS + 1), null), (err: ConfigError) => {
      assert.ok(err.issues.some((i) => i.path === `${section}.${key}` && /2147483647/.test(i.message)), `${key}: ${JSON.stringify(err.issues)}`);
      return true;
    });
  }
  assert.throws(() => parseConfig({ profiling: { snapshot_interval_s: 2_147_484 } }, null), /profiling\.snapshot_interval_s/);
  assert.equal(parseConfig({ profiling: { snapshot_interval_s: 2_147_483 } }, null).profiling!.snapshot_interval_s, 2_147_483);
});
