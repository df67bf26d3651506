// Every configuration key says when a change to it takes effect (runtime/config/applies.ts), the
// reference shows it, and a reload's list of restart-only keys is computed from those marks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, restartKeys, schemaKeys, type ProxyConfigInput } from '../../runtime/config/index.ts';
import { appliesText, renderConfigDocs } from '../../runtime/config/docs.ts';

const keys = schemaKeys();
const childrenOf = (path: string) => keys.filter((k) => k.path.startsWith(`${path}.`) || k.path.startsWith(`${path}[].`));

test('every schema key carries a reload mark (reload, restart, or partial with a note)', () => {
  const unmarked = keys.filter((k) => k.applies === undefined).map((k) => k.path);
  assert.deepEqual(unmarked, [], `mark these keys with onReload, onRestart or partlyOnReload in the schema: ${unmarked.join(', ')}`);
  for (const k of keys) {
    if (k.applies?.on === 'partial') assert.ok(k.applies.note.length > 0, `${k.path}: a partial mark needs its note`);
  }
});

test('"partial" marks only blocks, and a block marked reload or restart holds only keys marked the same', () => {
  for (const k of keys) {
    const children = childrenOf(k.path);
    if (k.applies?.on === 'partial') assert.ok(children.length > 0, `${k.path} is not a block: mark it reload or restart`);
    if (k.applies?.on === 'reload' || k.applies?.on === 'restart') {
      const other = children.filter((c) => c.applies?.on !== k.applies!.on).map((c) => c.path);
      assert.deepEqual(other, [], `${k.path} is marked ${k.applies.on} but holds keys marked otherwise: mark it partlyOnReload`);
    }
  }
});

test('the reference shows each key\'s mark in its "On reload" column, and each block\'s under its heading', () => {
  const docs = renderConfigDocs();
  for (const k of keys) {
    const row = docs.split('\n').find((l) => l.startsWith(`| \`${k.path}\` |`));
    if (row !== undefined) {
      assert.ok(row.includes(`| ${appliesText(k.applies).replace(/\|/g, '\\|')} |`), `${k.path}: ${row}`);
    } else {
      assert.ok(!k.path.includes('.'), `${k.path} has no row`);
      assert.ok(docs.includes(`## \`${k.path}\`\n`), `${k.path} is neither a row nor a section`);
      assert.ok(docs.includes(`On reload: ${appliesText(k.applies)}`), `${k.path}: the section states its mark`);
    }
  }
});

const base: ProxyConfigInput = {
  listen: '127.0.0.1:0',
  admin: { listen: '127.0.0.1:0', token: 'admin-token-0123456789' },
  profiling: { enabled: true, port: 0, token: 'profiling-token-0123456789' },
  control_plane: { port: 0, tokens: ['control-token-0123456789'] },
  pipeline: { request: ['logging'] },
};

function changed(edit: (c: any) => void): string[] {
  const next = structuredClone(base) as any;
  edit(next);
  return restartKeys(parseConfig(base, null), parseConfig(next, null));
}

test('a reload names the changed keys marked restart, and no key that applies', () => {
  assert.deepEqual(changed(() => {}), []);
  // Credentials and listener addresses apply on reload.
  assert.deepEqual(changed((c) => { c.admin.token = 'admin-token-rotated-0123'; c.admin.listen = '127.0.0.1:1'; }), []);
  assert.deepEqual(changed((c) => { c.profiling.token = 'profiling-token-rotated-01'; c.profiling.port = 1; c.profiling.host = 'localhost'; }), []);
  assert.deepEqual(changed((c) => { c.control_plane.tokens = ['control-token-rotated-012']; c.control_plane.port = 1;
    c.control_plane.token_env = 'OTHER'; }), []);
  assert.deepEqual(changed((c) => { delete c.admin; }), []);
  assert.deepEqual(changed((c) => { c.pipeline.request = []; c.steps = { cache: { config: { max_entries: 5 } } }; }), []);
  assert.deepEqual(changed((c) => { c.telemetry = { sample_rate: 0.5 }; }), ['telemetry']);
  // The most specific key is named.
  assert.deepEqual(changed((c) => { c.listen = '127.0.0.1:1'; }), ['listen']);
  assert.deepEqual(changed((c) => { c.upstream = { pool_size: 3 }; }), ['upstream.pool_size']);
  assert.deepEqual(changed((c) => { c.pipeline.id = 'other'; }), ['pipeline.id']);
  assert.deepEqual(changed((c) => { c.profiling.storage = 'mmap'; c.profiling.mmap_path = 'x.bin'; c.profiling.enabled = false; }),
    ['profiling.storage', 'profiling.mmap_path']);
  assert.deepEqual(changed((c) => { delete c.profiling; }), ['profiling']);
  assert.deepEqual(changed((c) => { delete c.control_plane; }), ['control_plane']);
  assert.deepEqual(changed((c) => { c.tls = { cert_file: 'a.pem', key_file: 'a.key' }; }), ['tls']);
  assert.deepEqual(changed((c) => { c.canary = { data_dir: 'elsewhere', auto_promote: true }; }), ['canary.data_dir']);
  assert.deepEqual(changed((c) => { c.notifications = { outbox_path: ':memory:', max_attempts: 3 }; }), ['notifications.outbox_path']);
  assert.deepEqual(changed((c) => { c.log = { level: 'debug' }; c.clients = { max_connections: 5 }; }), ['clients.max_connections', 'log.level']);
});

test('within telemetry only sample_rate applies; a changed array item applies as its keys say', () => {
  const withTelemetry = { ...base, telemetry: { otlp_endpoint: 'http://127.0.0.1:4318', sample_rate: 0.1 } };
  const before = parseConfig(withTelemetry, null);
  assert.deepEqual(restartKeys(before, parseConfig({ ...withTelemetry, telemetry: { ...withTelemetry.telemetry, sample_rate: 1 } }, null)), []);
  assert.deepEqual(restartKeys(before, parseConfig({ ...withTelemetry, telemetry: { ...withTelemetry.telemetry, service_name: 'x' } }, null)),
    ['telemetry.service_name']);
  const users = (name: string) => ({ ...base, auth: { users: [{ name, iterations: 4096, salt: 'c2FsdHNhbHRzYWx0c2FsdA==',
    stored_key: Buffer.alloc(32).toString('base64'), server_key: Buffer.alloc(32).toString('base64') }] } });
  assert.deepEqual(restartKeys(parseConfig(users('a'), null), parseConfig(users('b'), null)), []);
});
