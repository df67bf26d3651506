// One freePort (test/helpers/ports.ts) and one until (test/helpers/until.ts): a test file that
// writes its own fails here. And no test forks workers by accident: `proxy serve` runs one per CPU
// unless told, so every test that spawns it says how many (or goes through spawnServe, which says 1).
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

/** An argument list that runs `proxy serve`: ['…', 'serve', …] up to its closing bracket. */
const SERVE_ARGS = /\[[^[\]]*'serve'[^[\]]*\]/g;

test('every test that spawns proxy serve chooses its workers (the command\'s default is one per CPU)', () => {
  const files = readdirSync('test', { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && /\.(ts|mts|mjs)$/.test(d.name))
    .map((d) => join(d.parentPath, d.name))
    .filter((f) => f !== 'test/helpers/serve.ts' && f !== 'test/helpers/helpers.test.ts');
  const spawns = files.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(SERVE_ARGS)].map((m) => ({ f, args: m[0] })));
  assert.ok(spawns.length > 10, 'the scan finds the spawns');
  assert.deepEqual(spawns.filter((s) => !s.args.includes("'--workers'")), [], 'pass --workers (1 for one process), or use spawnServe');
});

test('freePort never hands out one port twice in a process, even to callers that do not bind it at once', async () => {
  const { freePort } = await import('./ports.ts');
  // 1,500 draws from ~12,700 ports: without the record of ports handed out, 12 repeated in one try.
  const ports = await Promise.all(Array.from({ length: 1500 }, () => freePort()));
  assert.equal(new Set(ports).size, ports.length);
});
