// OTEL_SEMCONV_STABILITY_OPT_IN as the proxy reads it (runtime/telemetry/semconv.ts): the list's
// grammar (OpenTelemetry's: comma-separated, trimmed, case ignored, other domains ignored), and a
// Tracing taking it from the environment unless its settings give it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stableDatabaseNames } from '../../runtime/telemetry/semconv.ts';
import { Tracing, type TracingSettings } from '../../runtime/telemetry/index.ts';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

test('database and database/dup opt in, in any case, among other entries; anything else does not', () => {
  for (const v of ['database', 'database/dup', 'DATABASE/DUP', ' http , database ', 'http/dup,database/dup,messaging', ',,database,']) {
    assert.equal(stableDatabaseNames(v), true, JSON.stringify(v));
  }
  for (const v of [undefined, '', ' ', 'http', 'http/dup,messaging', 'databases', 'database/du', 'db', 'database dup', 'database;http']) {
    assert.equal(stableDatabaseNames(v), false, JSON.stringify(v));
  }
});

test('a Tracing reads OTEL_SEMCONV_STABILITY_OPT_IN when it is made, unless its settings give the list', async () => {
  const settings: TracingSettings = {
    url: 'http://127.0.0.1:9/v1/traces', protocol: 'http/protobuf', serviceName: 'semconv-test', sampleRate: 0, resourceAttributes: {},
    maxQueueSpans: 64, maxBatchSpans: 64, exportIntervalMs: 60_000, exportTimeoutMs: 1000,
  };
  const before = process.env.OTEL_SEMCONV_STABILITY_OPT_IN;
  const made: Tracing[] = [];
  const make = (s: TracingSettings) => {
    const t = new Tracing(s, quiet);
    made.push(t);
    return t.stableDatabaseNames;
  };
  try {
    delete process.env.OTEL_SEMCONV_STABILITY_OPT_IN;
    assert.equal(make(settings), false, 'unset: the contract\'s names only');
    process.env.OTEL_SEMCONV_STABILITY_OPT_IN = 'http,database/dup';
    const opted = new Tracing(settings, quiet);
    made.push(opted);
    assert.equal(opted.stableDatabaseNames, true, 'read from the environment');
    process.env.OTEL_SEMCONV_STABILITY_OPT_IN = 'http';
    assert.equal(opted.stableDatabaseNames, true, 'read once, when the Tracing is made');
    assert.equal(make(settings), false, 'another domain only');
    assert.equal(make({ ...settings, semconvStabilityOptIn: 'database' }), true, 'the settings\' list wins over the environment');
    process.env.OTEL_SEMCONV_STABILITY_OPT_IN = 'database';
    assert.equal(make({ ...settings, semconvStabilityOptIn: '' }), false, 'an empty list in the settings too');
  } finally {
    if (before === undefined) delete process.env.OTEL_SEMCONV_STABILITY_OPT_IN;
    else process.env.OTEL_SEMCONV_STABILITY_OPT_IN = before;
    for (const t of made) await t.close();
  }
});
