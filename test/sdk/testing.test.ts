// sdk/testing's outcome values are documented: every Verdict member, with its number, has its row
// in docs/plugins.md's verdict table, and the table lists no other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Verdict } from '../../sdk/testing/index.ts';

test('docs/plugins.md lists every Verdict of sdk/testing with its value, and no other', () => {
  // Verdict is a const enum (inlined where it is used): its members are read from its declaration.
  const decl = /export const enum Verdict \{([^}]*)\}/.exec(readFileSync('runtime/pipeline/exchange.ts', 'utf8'));
  assert.ok(decl !== null, 'the Verdict declaration');
  const members = decl[1].split(',').map((m) => m.trim()).filter(Boolean).map((m) => {
    const [name, value] = m.split('=').map((x) => x.trim());
    return [name, Number(value)] as [string, number];
  });
  assert.deepEqual(members.find(([n]) => n === 'Reject'), ['Reject', Verdict.Reject], 'the declaration read is the one sdk/testing exports');
  const doc = readFileSync('docs/plugins.md', 'utf8');
  const documented = [...doc.matchAll(/^\| `Verdict\.(\w+)` \| (\d+) \|/gm)].map((m) => [m[1], Number(m[2])] as [string, number]);
  assert.deepEqual(documented.sort(), members.sort());
});
