// Where `proxy canary adopt` puts the fragment: the `pipeline` block and the top-level `steps` for
// the default pipeline (naming other pipelines that list a changed step), an entry of `pipelines`
// and that entry's own `steps` otherwise; only the steps the promotion changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fragmentFor, fragmentYaml, type BaselineAnswer } from '../../runtime/cli/canary-adopt.ts';

const answer = (pipelineId: string): BaselineAnswer => ({
  pipeline_id: pipelineId, source: 'promotion', version: 'sha256:x', canary_id: 'c-1', promoted_at: '2026-11-27T00:00:00.000Z',
  config: { pipeline: { request: ['logging', 'filter'], response: [] }, steps: { logging: { config: {} }, filter: { config: { rules: [] } } } },
  file: { pipeline: { request: ['logging'], response: [] }, steps: { logging: { config: {} } } },
});

test('default pipeline: the pipeline block and the changed step under top-level steps; other pipelines listing it are named', () => {
  const doc = { pipeline: { request: ['logging'] }, pipelines: [{ id: 'reports', match: { app_name: 'r*' }, request: ['filter'], response: [] }] };
  const f = fragmentFor(answer('default'), doc);
  assert.deepEqual(f.sets.map((s) => s.path), [['pipeline', 'request'], ['pipeline', 'response'], ['steps', 'filter']]);
  assert.deepEqual(f.changedSteps, ['filter']);
  assert.deepEqual(f.sharedWith, ['reports']);
  assert.match(fragmentYaml(f), /^pipeline:\n {2}request:\n {4}- logging\n {4}- filter\n/);
});

test('an entry of pipelines: its request/response and its own steps, nothing shared', () => {
  const doc = { pipelines: [{ id: 'admin', request: [] }, { id: 'reports', request: ['logging'], response: [] }] };
  const f = fragmentFor(answer('reports'), doc);
  assert.deepEqual(f.sets.map((s) => s.path), [['pipelines', 1, 'request'], ['pipelines', 1, 'response'], ['pipelines', 1, 'steps', 'filter']]);
  assert.deepEqual(f.sharedWith, []);
  assert.match(fragmentYaml(f, 'reports'),
    /^# in the entry of pipelines whose id is reports\nrequest:\n {2}- logging\n {2}- filter\nresponse: \[\]\nsteps:\n {2}filter:/);
});
