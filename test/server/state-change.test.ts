// Upstream state-change errors are answered as HostUnreachable (runtime/server/state-change.ts):
// the frame-level rule, byte for byte. The failover tests (test/upstream/topology-rs.test.ts) show
// the driver-visible side under a real step-down.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize, deserialize, type Document } from 'bson';
import { encodeOpMsg, parseOpMsg } from '../../runtime/wire/index.ts';
import { stateChangeReplacement } from '../../runtime/server/state-change.ts';

const frame = (doc: Document) => encodeOpMsg(77, 12, 0, serialize(doc));

test('a state-change error (ok: 0 first, code 10107 / 91 / 13435 …) becomes HostUnreachable with the upstream\'s words and labels', () => {
  for (const [code, codeName] of [[10107, 'NotWritablePrimary'], [91, 'ShutdownInProgress'], [13435, 'NotPrimaryNoSecondaryOk'],
    [11600, 'InterruptedAtShutdown'], [189, 'PrimarySteppedDown']] as const) {
    const out = stateChangeReplacement(frame({ ok: 0, errmsg: 'not primary', code, codeName, errorLabels: ['RetryableWriteError'] }), 'db1:27017');
    assert.ok(out !== null, `${codeName} is replaced`);
    const msg = parseOpMsg(out);
    assert.equal(msg.requestId, 77);
    assert.equal(msg.responseTo, 12);
    const doc = deserialize(msg.body);
    assert.equal(doc.code, 6);
    assert.equal(doc.codeName, 'HostUnreachable');
    assert.deepEqual(doc.errorLabels, ['RetryableWriteError']);
    assert.match(doc.errmsg, new RegExp(`upstream db1:27017 answered ${codeName} \\(${code}\\): not primary`));
  }
});

test('other replies pass untouched: successes, other errors, ok not first', () => {
  assert.equal(stateChangeReplacement(frame({ cursor: { id: 0n, ns: 'a.b', firstBatch: [] }, ok: 1 }), 'x'), null);
  assert.equal(stateChangeReplacement(frame({ ok: 0, errmsg: 'dup', code: 11000, codeName: 'DuplicateKey' }), 'x'), null);
  assert.equal(stateChangeReplacement(frame({ ok: 1, n: 1 }), 'x'), null);
  // Only an error reply that leads with ok is looked at (mongod's and mongos's shape).
  assert.equal(stateChangeReplacement(frame({ errmsg: 'x', ok: 0, code: 10107 }), 'x'), null);
});

test('ok as a double (mongod), int32 (JavaScript encoders) or int64 is recognised', () => {
  const body = (okType: number) => {
    // { ok: 0 (okType), code: 91 (int32) }
    const parts: number[] = [];
    if (okType === 0x01) parts.push(0x01, 0x6f, 0x6b, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    if (okType === 0x10) parts.push(0x10, 0x6f, 0x6b, 0, 0, 0, 0, 0);
    if (okType === 0x12) parts.push(0x12, 0x6f, 0x6b, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    parts.push(0x10, 0x63, 0x6f, 0x64, 0x65, 0, 91, 0, 0, 0, 0);
    const b = Buffer.from([0, 0, 0, 0, ...parts]);
    b.writeInt32LE(b.length, 0);
    return b;
  };
  for (const t of [0x01, 0x10, 0x12]) {
    const out = stateChangeReplacement(encodeOpMsg(1, 2, 0, body(t)), 'x');
    assert.ok(out !== null, `ok of BSON type 0x${t.toString(16)}`);
    assert.equal(deserialize(parseOpMsg(out).body).code, 6);
  }
});
