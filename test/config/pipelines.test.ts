// The `pipelines` key: what loads, and what is refused at load with its key path and reason — a
// pipeline that can never match (shadowed), an unknown step, a bad CIDR, an unknown match key,
// duplicate and reserved ids, a default pipeline with a match or defined twice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, parseConfig, pipelineEntries } from '../../runtime/config/index.ts';
import { globCovers, matchCovers, parseCidr, compileCidrs, compileGlob } from '../../runtime/config/pipeline-match.ts';
import { mmapFitIssue } from '../../runtime/profiling/index.ts';

/** The single issue line of the refused configuration (`<config>: <path>: <reason>`). */
function refused(raw: Record<string, unknown>): string[] {
  try {
    parseConfig(raw, null);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.issues.map((i) => `${i.path}: ${i.message}`);
  }
  assert.fail('the configuration was accepted');
}

test('pipelines load in matching order with the default last; the pipeline block alone is the one default pipeline', () => {
  const c = parseConfig({
    steps: { filter: { config: { default: 'allow' } } },
    pipelines: [
      { id: 'default', request: ['logging'] },
      { id: 'reports', match: { app_name: 'reports-*', client: ['10.0.0.0/8', '::1'] }, request: ['cache'] },
      { id: 'audit', match: { db: 'audit', collection: ['log_*'], command: 'insert' }, response: ['metrics'], steps: { metrics: { config: { x: 1 } } } },
    ],
  }, null);
  assert.deepEqual(pipelineEntries(c).map((e) => e.id), ['reports', 'audit', 'default']);
  assert.deepEqual(pipelineEntries(c)[2].request, ['logging']);
  assert.deepEqual(pipelineEntries(parseConfig({ pipeline: { id: 'main', request: ['cache'] } }, null)).map((e) => [e.id, e.request]), [['main', ['cache']]]);
  // No `default` entry: the pipeline block (empty) takes what matches nothing.
  assert.deepEqual(pipelineEntries(parseConfig({ pipelines: [{ id: 'a', match: { db: 'x' } }] }, null)).map((e) => e.id), ['a', 'default']);
});

test('a pipeline after a match-all one can never match: refused at its match with the reason', () => {
  assert.deepEqual(refused({ pipelines: [{ id: 'all' }, { id: 'late', match: { db: 'x' } }] }), [
    'pipelines[1].match: pipeline "late" can never match: pipelines[0] ("all") comes first and has no match (it takes every request)',
  ]);
  // An empty match is a match-all too; and it shadows the default pipeline when that has steps.
  assert.deepEqual(refused({ pipelines: [{ id: 'all', match: {} }, { id: 'default', request: ['logging'] }] }), [
    'pipelines[1].id: the default pipeline "default" can never match: pipelines[0] ("all") has no match and takes every request',
  ]);
  assert.deepEqual(refused({ pipeline: { request: ['logging'] }, pipelines: [{ id: 'all' }] }), [
    'pipeline: the default pipeline "default" can never match: pipelines[0] ("all") has no match and takes every request',
  ]);
  // A match-all entry last, with an empty default pipeline, is accepted (the default simply gets nothing).
  assert.doesNotThrow(() => parseConfig({ pipelines: [{ id: 'a', match: { db: 'x' } }, { id: 'rest' }] }, null));
});

test('an identical or covering earlier match shadows a later pipeline; a narrower earlier one does not', () => {
  assert.match(refused({ pipelines: [{ id: 'a', match: { app_name: 'x', db: 'd' } }, { id: 'b', match: { db: 'd', app_name: 'x' } }] })[0],
    /^pipelines\[1\]\.match: pipeline "b" can never match: pipelines\[0\] \("a"\) comes first and matches every request this one matches$/);
  assert.match(refused({ pipelines: [{ id: 'a', match: { app_name: 'rep*' } },
    { id: 'b', match: { app_name: ['report', 'rep-?'], user: 'u' } }] })[0], /pipelines\[1\]\.match: pipeline "b" can never match/);
  assert.match(refused({ pipelines: [{ id: 'a', match: { client: '10.0.0.0/8' } }, { id: 'b', match: { client: '10.1.0.0/16' } }] })[0],
    /pipelines\[1\]\.match/);
  // Narrower first, wider after: both can match.
  assert.doesNotThrow(() => parseConfig({ pipelines: [{ id: 'a', match: { client: '10.1.0.0/16' } }, { id: 'b', match: { client: '10.0.0.0/8' } }] }, null));
  assert.doesNotThrow(() => parseConfig({ pipelines: [{ id: 'a', match: { db: 'x', user: 'u' } }, { id: 'b', match: { db: 'x' } }] }, null));
  assert.doesNotThrow(() => parseConfig({ pipelines: [{ id: 'a', match: { command: 'find' } }, { id: 'b', match: { command: ['find', 'insert'] } }] }, null));

  // A command mongod runs under two spellings: a match on either takes both, so the second spelling is shadowed.
  assert.match(refused({ pipelines: [{ id: 'a', match: { command: 'findAndModify' } }, { id: 'b', match: { command: 'findandmodify' } }] })[0],
    /^pipelines\[1\]\.match: pipeline "b" can never match: pipelines\[0\] \("a"\) comes first/);
  assert.match(refused({ pipelines: [{ id: 'a', match: { command: ['isMaster', 'find'] } }, { id: 'b', match: { command: ['ismaster', 'find'] } }] })[0],
    /^pipelines\[1\]\.match: pipeline "b" can never match/);
});

test('an unknown step, a bad CIDR and an unknown match key are refused with their key path', () => {
  assert.deepEqual(refused({ pipelines: [{ id: 'a', match: { db: 'x' }, response: ['metrics', 'nope'] }] }), [
    'pipelines[0].response[1]: unknown step type "nope": not a built-in step (logging, filter, cache, metrics, rate_limit, auth, transform, ' +
      'route), and steps.nope names no "module" or "package"',
  ]);
  // A pipeline's own steps entry names the module.
  assert.doesNotThrow(() => parseConfig({ pipelines: [{ id: 'a', request: ['redact'], steps: { redact: { module: 'build/plugins/redact.wasm' } } }] }, null));
  assert.deepEqual(refused({ pipelines: [{ id: 'a', match: { client: ['10.0.0.0/8', '10.0.0.0/33'] } }] }), [
    'pipelines[0].match.client: prefix length "33" must be an integer 0..32',
  ]);
  assert.deepEqual(refused({ pipelines: [{ id: 'a', match: { client: 'localhost' } }] }), [
    'pipelines[0].match.client: "localhost" is not an IPv4 or IPv6 address',
  ]);
  const unknown = refused({ pipelines: [{ id: 'a', match: { appName: 'x' } }] });
  assert.equal(unknown.length, 1);
  assert.match(unknown[0], /^pipelines\[0\]\.match\.appName: unknown key "appName"/);
});

test('ids: unique, not a graph variant, a plain name; the default pipeline has no match and is defined once', () => {
  assert.deepEqual(refused({ pipelines: [{ id: 'a', match: { db: 'x' } }, { id: 'a', match: { db: 'y' } }] }),
    ['pipelines[1].id: duplicate pipeline id "a" (also pipelines[0])']);
  assert.deepEqual(refused({ pipelines: [{ id: 'candidate', match: { db: 'x' } }] }),
    ['pipelines[0].id: "candidate" names a graph variant and cannot be a pipeline id']);
  assert.match(refused({ pipelines: [{ id: 'a b' }] })[0], /^pipelines\[0\]\.id: /);
  assert.deepEqual(refused({ pipelines: [{ id: 'default', match: { db: 'x' } }] }), [
    'pipelines[0].match: pipeline "default" is the default pipeline (it takes every request no other pipeline matches) and has no match; give this ' +
      'pipeline another id, or remove its match',
  ]);
  assert.deepEqual(refused({ pipeline: { request: ['cache'] }, pipelines: [{ id: 'default', request: ['logging'] }] }), [
    'pipelines[0].id: pipeline "default" is defined twice: here and by the pipeline block\'s steps; list its steps in one place',
  ]);
});

test('pipeline.id follows the rule of pipelines[].id: the same pattern and at most 48 characters, refused with its key path', () => {
  const ok = 'a'.repeat(48);
  for (const [id, fine] of [[ok, true], ['orders.v2_eu-1', true], [`${ok}b`, false], ['a b', false], ['', false], ['-a', false], ['a/b', false],
    ['é', false]] as const) {
    for (const [raw, path] of [[{ pipeline: { id } }, 'pipeline.id'], [{ pipelines: [{ id, match: { db: 'x' } }] }, 'pipelines[0].id']] as const) {
      if (fine) {
        assert.doesNotThrow(() => parseConfig(raw, null), `${path} ${id}`);
        continue;
      }
      const issues = refused(raw);
      assert.equal(issues.length, 1, issues.join('; '));
      assert.equal(issues[0], `${path}: expected pipeline id: letters, digits, "_", "-" and ".", starting with a letter or digit, at most 48 ` +
        `characters, received ${JSON.stringify(id)}`);
    }
  }
});

test('match primitives: globs, CIDR blocks (IPv4-mapped clients), coverage', () => {
  assert.ok(compileGlob('rep*')('reports') && !compileGlob('rep*')('xrep'));
  assert.ok(compileGlob('*_archive')('orders_archive') && compileGlob('a?c*')('abcd') && !compileGlob('a?c')('ac'));
  assert.ok(compileGlob('a.b')('a.b') && !compileGlob('a.b')('axb'), 'regex characters are literal');
  const net = parseCidr('10.1.2.3/16');
  assert.ok(typeof net !== 'string');
  const inNet = compileCidrs([net]);
  assert.ok(inNet('10.1.200.1') && inNet('::ffff:10.1.0.9') && !inNet('10.2.0.1') && !inNet('::1'));
  const v6 = parseCidr('2001:db8::/32');
  assert.ok(typeof v6 !== 'string' && compileCidrs([v6])('2001:db8:1::5') && !compileCidrs([v6])('2001:db9::1'));
  assert.ok(globCovers('rep*', 'report?') && globCovers('*', 'x*') && !globCovers('rep*', '*rep') && !globCovers('a?', 'ab*'));
  assert.ok(matchCovers({}, { db: 'x' }) && !matchCovers({ db: 'x' }, {}) && matchCovers({ user: ['a', 'b'] }, { user: 'a', db: 'q' }));
});

test('profiling.storage "mmap": the histogram file must hold every pipeline\'s two graphs', () => {
  const p = (id: string, n: number) => ({ id, request: Array.from({ length: n }, (_, i) => `s${i}`), response: [] });
  // 1 MiB holds 178 rows; a pipeline of N steps needs 2 × (4 + 2N).
  assert.equal(mmapFitIssue([p('a', 20), p('default', 20)], 1), null, '2 × 88 = 176 rows fit');
  const issue = mmapFitIssue([p('a', 20), p('b', 1), p('default', 20)], 1);
  assert.ok(issue !== null);
  assert.equal(issue.path, 'profiling.mmap_size_mb');
  assert.match(issue.message, /these pipelines need 188 \(3 pipelines, each 2 graphs × \(4 \+ 2 phases × its steps\)\): set at least 2$/);
  assert.match(mmapFitIssue([p('x'.repeat(70), 1), p('default', 0)], 1)?.message ?? '', /^pipeline "x+": id must be at most 63 bytes/);
});
