// One freePort (test/helpers/ports.ts) and one until (test/helpers/until.ts): a test file that
// writes its own fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const STILL_OWN = new Set<string>([]);

/** A port finder of its own, or a waiting loop of its own (an async `until`). */
const OWN = /(?:function\s+freePort\s*\(|const\s+freePort\s*=|async\s+function\s+until\s*\(|const\s+until\s*=\s*async)/;

test('no test file writes its own freePort or until', () => {
  const files = readdirSync('test', { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && /\.(ts|mts|mjs)$/.test(d.name))
    .map((d) => join(d.parentPath, d.name))
    .filter((f) => f !== 'test/helpers/ports.ts' && f !== 'test/helpers/until.ts' && !f.startsWith('test/fixtures/'));
  assert.ok(files.length > 100, 'the scan reads the tests');
  const own = files.filter((f) => OWN.test(readFileSync(f, 'utf8')));
  assert.deepEqual(own.filter((f) => !STILL_OWN.has(f)), [], 'use test/helpers/ports.ts and test/helpers/until.ts');
  assert.deepEqual([...STILL_OWN].filter((f) => !own.includes(f)), [], 'a file that moved to the helpers leaves the list');
});
