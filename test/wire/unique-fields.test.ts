// checkUniqueFields: a repeated top-level name (pairwise below 17 fields, hashed above), and a
// document sequence named like a body field (top level or a dotted path through documents), are
// refused with PROXY_ERR_DUPLICATE_FIELD; distinct names pass, whatever their number.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize } from 'bson';
import { checkUniqueFields, WireError } from '../../runtime/wire/index.ts';

/** A document of the given one-key parts, in order, duplicates kept. */
function doc(...parts: Record<string, unknown>[]): Buffer {
  const els = parts.map((p) => { const b = Buffer.from(serialize(p)); return b.subarray(4, b.length - 1); });
  const h = Buffer.alloc(4);
  h.writeInt32LE(4 + els.reduce((a, e) => a + e.length, 0) + 1, 0);
  return Buffer.concat([h, ...els, Buffer.from([0])]);
}

const refused = (re: RegExp) => (e: unknown) => e instanceof WireError && e.code === 'PROXY_ERR_DUPLICATE_FIELD' && re.test(e.message);
const seq = (id: string) => [{ id, payload: Buffer.from(serialize({ a: 1 })) }];

test('distinct names pass, few or many', () => {
  checkUniqueFields(doc({ find: 'c' }, { filter: {} }, { $db: 'x' }), null);
  const many = Array.from({ length: 500 }, (_, i) => ({ [`f${i}`]: i }));
  checkUniqueFields(doc({ find: 'c' }, ...many), null);
  // names that differ only in length or in their last byte
  checkUniqueFields(doc({ a: 1 }, { aa: 1 }, { ab: 1 }, { b: 1 }), null);
});

test('a repeated name is refused: first fields, late fields, past the pairwise bound', () => {
  assert.throws(() => checkUniqueFields(doc({ find: 'c' }, { filter: { a: 1 } }, { filter: { a: 2 } }), null), refused(/'filter' is a duplicate/));
  assert.throws(() => checkUniqueFields(doc({ find: 'c' }, { $db: 'a' }, { $db: 'b' }), null), refused(/'\$db'/));
  const many = Array.from({ length: 40 }, (_, i) => ({ [`f${i}`]: i }));
  assert.throws(() => checkUniqueFields(doc({ find: 'c' }, ...many, { f3: 'again' }), null), refused(/'f3'/));
  assert.throws(() => checkUniqueFields(doc({ find: 'c' }, ...many, { find: 'd' }), null), refused(/'find'/));
  const dupInSmall = Array.from({ length: 15 }, (_, i) => ({ [`g${i}`]: i }));
  assert.throws(() => checkUniqueFields(doc(...dupInSmall, { g0: 1 }), null), refused(/'g0'/));
});

test('a sequence named like a body field is refused; a nested field of another name is not', () => {
  checkUniqueFields(doc({ insert: 'c' }, { $db: 'x' }), seq('documents'));
  assert.throws(() => checkUniqueFields(doc({ insert: 'c' }, { documents: [] }, { $db: 'x' }), seq('documents')),
    refused(/sequence "documents" is also a field/));
  assert.throws(() => checkUniqueFields(doc({ insert: 'c' }, { a: { b: 1 } }), seq('a.b')), refused(/"a\.b"/));
  checkUniqueFields(doc({ insert: 'c' }, { a: { c: 1 } }), seq('a.b'));
  checkUniqueFields(doc({ insert: 'c' }, { a: 1 }), seq('a.b'));
});
