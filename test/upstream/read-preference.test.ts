// $readPreference read off a command (no decode for a mode-only document) and replica-set server
// selection as the Server Selection specification describes it: mode, tag sets, staleness, latency window.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize } from 'bson';
import { CommandPeek } from '../../runtime/wire/index.ts';
import { ProxyError } from '../../runtime/errors/index.ts';
import { ReadPreferenceReader, ReplicaSetSelector, PRIMARY, parseUpstreamUri, type ReadPreference } from '../../runtime/upstream/index.ts';

const reader = new ReadPreferenceReader(10_000);
const peek = new CommandPeek();

function readOf(cmd: Record<string, unknown>): ReadPreference | ProxyError {
  const body = Buffer.from(serialize(cmd));
  peek.read(body);
  return reader.read(body, peek.readPreferenceAt);
}

test('no $readPreference is primary; a mode-only document maps to one shared object per mode', () => {
  assert.equal(readOf({ find: 'c', $db: 'app' }), PRIMARY);
  const a = readOf({ find: 'c', $readPreference: { mode: 'secondary' }, $db: 'app' });
  const b = readOf({ find: 'd', filter: { x: 1 }, $readPreference: { mode: 'secondary' }, $db: 'app' });
  assert.equal((a as ReadPreference).mode, 'secondary');
  assert.equal(a, b, 'the same constant: nothing decoded or allocated');
  for (const mode of ['primary', 'primaryPreferred', 'secondaryPreferred', 'nearest']) {
    assert.equal((readOf({ find: 'c', $readPreference: { mode } }) as ReadPreference).mode, mode);
  }
});

test('tags and maxStalenessSeconds are read; invalid read preferences are errors with a reason', () => {
  const rp = readOf({ find: 'c', $readPreference: { mode: 'nearest', tags: [{ dc: 'east', rack: 1 }, {}], maxStalenessSeconds: 120 } }) as ReadPreference;
  assert.deepEqual(rp, { mode: 'nearest', tags: [{ dc: 'east', rack: '1' }, {}], maxStalenessSeconds: 120 });
  const bad = (cmd: Record<string, unknown>, code: number, re: RegExp) => {
    const r = readOf(cmd);
    assert.ok(r instanceof ProxyError, JSON.stringify(cmd));
    assert.equal(r.code, code);
    assert.match(r.message, re);
  };
  bad({ find: 'c', $readPreference: { mode: 'fastest' } }, 9, /mode "fastest"/);
  bad({ find: 'c', $readPreference: { mode: 'primary', tags: [{ dc: 'east' }] } }, 2, /primary cannot be combined/);
  bad({ find: 'c', $readPreference: { mode: 'secondary', maxStalenessSeconds: 30 } }, 2, /below the least allowed \(90 s/);
  bad({ find: 'c', $readPreference: { mode: 'secondary', tags: 'east' } }, 9, /tag sets/);
});

interface S { name: string; isPrimary: boolean; isSecondary: boolean; rttMs: number; tags: Record<string, string>; lastWriteDate: number;
  lastUpdateTime: number }
const now = Date.now();
const srv = (name: string, role: 'P' | 'S', rttMs: number, tags: Record<string, string> = {}, lagMs = 0): S =>
  ({ name, isPrimary: role === 'P', isSecondary: role === 'S', rttMs, tags, lastWriteDate: now - lagMs, lastUpdateTime: now });
const rp = (mode: ReadPreference['mode'], tags: Record<string, string>[] = [],
  maxStalenessSeconds = -1): ReadPreference => ({ mode, tags, maxStalenessSeconds });

test('selection: modes, tag sets in order, staleness, latency window', () => {
  const sel = new ReplicaSetSelector<S>(10_000, 15);
  const p = srv('p', 'P', 1);
  const s1 = srv('s1', 'S', 2, { dc: 'west' });
  const s2 = srv('s2', 'S', 3, { dc: 'east' }, 200_000);
  const far = srv('far', 'S', 80, { dc: 'east' });
  const all = [p, s1, s2, far];
  const names = (r: ReadPreference, servers: S[], primary: S | null, n = 12) =>
    new Set(Array.from({ length: n }, () => sel.select(r, servers, primary)?.name ?? null));
  assert.deepEqual(names(rp('primary'), all, p), new Set(['p']));
  assert.deepEqual(names(rp('primary'), all, null), new Set([null]), 'no primary: nothing (the request waits)');
  assert.deepEqual(names(rp('secondary'), all, p), new Set(['s1', 's2']), 'far is outside the 15 ms window');
  assert.deepEqual(names(rp('secondary', [{ dc: 'north' }, { dc: 'east' }]), all, p), new Set(['s2']),
    'the first tag set matches nothing, the second s2 and far; far is outside the window');
  assert.deepEqual(names(rp('secondary', [{ dc: 'north' }]), all, p), new Set([null]));
  assert.deepEqual(names(rp('secondaryPreferred', [{ dc: 'north' }]), all, p), new Set(['p']));
  assert.deepEqual(names(rp('primaryPreferred'), all, null), new Set(['s1', 's2']));
  assert.deepEqual(names(rp('nearest'), all, p), new Set(['p', 's1', 's2']));
  assert.deepEqual(names(rp('secondary', [], 90), all, p), new Set(['s1']), 's2 lags 200 s, far is slow');
  assert.deepEqual(names(rp('secondary', [{ dc: 'east' }], 90), all, p), new Set(['far']), 'fresh east: only far');
});

test('upstream.uri: replicaSet is read; an empty one is refused', () => {
  assert.equal(parseUpstreamUri('mongodb://a:1,b:2/?replicaSet=rs0').replicaSet, 'rs0');
  assert.equal(parseUpstreamUri('mongodb://a:1,b:2').replicaSet, null);
  assert.throws(() => parseUpstreamUri('mongodb://a:1/?replicaSet='), /replicaSet is empty/);
});
