// The catalogue of error codes (runtime/errors/catalogue.ts) against the source and the docs, in
// fastify's habit: a code used anywhere in runtime/ — wire, wasm, configuration, HTTP, canary, CLI,
// bench, the dashboard's scripts — has its entry and its line in docs/errors.md; no entry is left
// that nothing uses; a code the docs name exists, with the status the catalogue gives it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERRORS, exitCodeOf, isErrorCode, type ErrorEntry, type ProxyErrorCode } from '../../runtime/errors/catalogue.ts';
import { ERRORS_DOCS_PATH, renderErrorDocs } from '../../runtime/errors/docs.ts';
import { httpError } from '../../runtime/http/index.ts';
import { WireError } from '../../runtime/wire/errors.ts';
import { BenchError } from '../../runtime/bench/errors.ts';
import { ProfileError } from '../../runtime/cli/profile.ts';
import { EXIT } from '../../runtime/cli/canary-client.ts';

const CODE = /PROXY_ERR_[A-Z0-9_]*[A-Z0-9]/g;
const CATALOGUE_FILE = join('runtime', 'errors', 'catalogue.ts');

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && ext.test(d.name))
    .map((d) => join(d.parentPath, d.name));
}

/** Code → the runtime files that name it (the catalogue itself aside). */
function codesUsedInRuntime(): Map<string, string[]> {
  const used = new Map<string, string[]>();
  for (const file of files('runtime', /\.(ts|mts|js|mjs)$/)) {
    if (file === CATALOGUE_FILE) continue;
    for (const m of readFileSync(file, 'utf8').matchAll(CODE)) {
      const where = used.get(m[0]) ?? [];
      if (!where.includes(file)) where.push(file);
      used.set(m[0], where);
    }
  }
  return used;
}

test('docs/errors.md is the output of renderErrorDocs (regenerate: node --import tsx runtime/errors/docs.ts)', () => {
  assert.equal(readFileSync(ERRORS_DOCS_PATH, 'utf8'), renderErrorDocs());
});

test('every table of docs/errors.md has as many cells in its header and delimiter row as in each row (else it is no table)', () => {
  // A cell is what lies between unescaped pipes (a meaning may hold `\|`).
  const cellCount = (line: string) => line.replace(/\\\|/g, '').split('|').length - 2;
  const lines = renderErrorDocs().split('\n');
  let tables = 0;
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith('|') || (i > 0 && lines[i - 1].startsWith('|'))) continue;
    tables++;
    assert.match(lines[i + 1], /^\|(?:---\|)+$/, `table at line ${i + 1}: a delimiter row follows the header`);
    const width = cellCount(lines[i]);
    for (let j = i + 1; j < lines.length && lines[j].startsWith('|'); j++) {
      assert.equal(cellCount(lines[j]), width, `line ${j + 1} has as many cells as its table's header (line ${i + 1}): ${lines[j]}`);
    }
  }
  assert.ok(tables >= 10, `found ${tables} tables: one per section`);
});

test('every code used in runtime/ has its catalogue entry and a line in docs/errors.md', () => {
  const used = codesUsedInRuntime();
  assert.ok(used.size > 40, `found ${used.size} codes: the scan reads the source`);
  const doc = readFileSync(ERRORS_DOCS_PATH, 'utf8').split('\n');
  for (const [code, where] of used) {
    assert.ok(isErrorCode(code), `${code} (used in ${where.join(', ')}) has no entry in runtime/errors/catalogue.ts`);
    const line = doc.find((l) => l.startsWith(`| \`${code}\` |`));
    assert.ok(line !== undefined, `${code} has a line in docs/errors.md`);
    assert.ok(line.includes(ERRORS[code].meaning.replace(/\|/g, '\\|')), `${code}'s line in docs/errors.md gives its meaning`);
  }
});

test('every catalogue entry is used somewhere in runtime/ (a code no longer returned is removed)', () => {
  const used = codesUsedInRuntime();
  for (const code of Object.keys(ERRORS)) assert.ok(used.has(code), `${code} is in the catalogue but nothing in runtime/ uses it`);
});

test('each line of docs/errors.md shows the entry\'s HTTP status, exit code and MongoDB error', () => {
  const doc = readFileSync(ERRORS_DOCS_PATH, 'utf8').split('\n');
  for (const [code, e] of Object.entries(ERRORS) as Array<[ProxyErrorCode, ErrorEntry]>) {
    const cells = doc.find((l) => l.startsWith(`| \`${code}\` |`))!.split(' | ');
    if (e.status !== undefined) assert.ok(cells.includes(String(e.status)), `${code} shows status ${e.status}`);
    if (e.exit !== undefined) assert.ok(cells.includes(String(e.exit)), `${code} shows exit ${e.exit}`);
    if (e.mongo !== undefined) assert.ok(cells.some((c) => c.startsWith(e.mongo!)), `${code} shows ${e.mongo}`);
  }
});

test('a code the other docs name is in the catalogue, and a table row\'s status or exit code is the catalogue\'s', () => {
  for (const file of files('docs', /\.md$/)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(CODE)) assert.ok(isErrorCode(m[0]), `${file} names ${m[0]}, which is not in the catalogue`);
    for (const m of text.matchAll(/^\| (\d{3}) \| `(PROXY_ERR_[A-Z0-9_]+)` \|/gm)) {
      const e = ERRORS[m[2] as ProxyErrorCode] as ErrorEntry;
      assert.equal(String(e.status), m[1], `${file}: ${m[2]} is answered ${e.status}, not ${m[1]}`);
    }
    // A table of exit codes (`| 3 | … PROXY_ERR_… |`): a code the catalogue gives an exit code has that one.
    for (const line of text.split('\n')) {
      const exit = /^\| (\d{1,2}) \|/.exec(line);
      if (exit === null) continue;
      for (const m of line.matchAll(CODE)) {
        const e = ERRORS[m[0] as ProxyErrorCode] as ErrorEntry | undefined;
        if (e?.exit !== undefined) assert.equal(String(e.exit), exit[1], `${file}: ${m[0]} exits ${e.exit}, not ${exit[1]}`);
      }
    }
  }
});

test('the classes answer and exit as the catalogue says', () => {
  const e = httpError('PROXY_ERR_CANARY_EXISTS');
  assert.equal(e.status, 409);
  assert.deepEqual(e.body, { error: { code: 'PROXY_ERR_CANARY_EXISTS', message: ERRORS.PROXY_ERR_CANARY_EXISTS.meaning } });
  assert.equal(httpError('PROXY_ERR_CONFIG', 'bad').status, 400);
  assert.equal(new ProfileError('PROXY_ERR_PROFILE_USAGE', 'x').exitCode, 2);
  assert.equal(new ProfileError('PROXY_ERR_PROFILE_UNREACHABLE', 'x').exitCode, 1);
  assert.equal(exitCodeOf(new BenchError('PROXY_ERR_BENCH_BAD_OPTION', 'x').code), 2);
  assert.equal(EXIT.usage, 2);
  assert.equal(EXIT.notFound, 3);
  assert.equal(EXIT.unreachable, 5);
  assert.equal(new WireError('PROXY_ERR_BAD_BSON', 'x', true).code, 'PROXY_ERR_BAD_BSON');
  // A code is a key of the catalogue, so a misspelt one does not compile (tsc checks this line).
  // @ts-expect-error PROXY_ERR_BAD_BSN is no code
  assert.equal(new WireError('PROXY_ERR_BAD_BSN', 'x', true).code, 'PROXY_ERR_BAD_BSN');
});
