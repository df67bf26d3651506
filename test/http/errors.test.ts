// The HTTP error table (runtime/http/errors.ts) against the docs: every code the APIs answer with
// is documented with its status, and every code the admin API's source and the base of every app
// (app.ts) send is a row of docs/http-api.md's error tables (the fastify habit: a test that every
// code is documented).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { HttpErrors, type HttpErrorCode } from '../../runtime/http/index.ts';

const read = (p: string) => readFileSync(p, 'utf8');
const DOCS = ['docs/http-api.md', 'docs/canary.md', 'docs/profiling.md'].map(read);
const codesSentBy = (src: string) => new Set([...read(src).matchAll(/'(PROXY_ERR_[A-Z_]+)'/g)].map((m) => m[1]));

test('every code in the HTTP error table is documented next to its status', () => {
  for (const [code, e] of Object.entries(HttpErrors)) {
    const lines = DOCS.flatMap((d) => d.split('\n')).filter((l) => l.includes(`\`${code}\``));
    assert.ok(lines.length > 0, `${code} is documented`);
    assert.ok(lines.some((l) => l.includes(String(e.status))), `${code} is documented with its status ${e.status}`);
  }
});

test('every code the admin API and the HTTP base send is a row of docs/http-api.md\'s error tables, with its status', () => {
  const doc = read('docs/http-api.md');
  for (const code of [...codesSentBy('runtime/http/admin.ts'), ...codesSentBy('runtime/http/app.ts')]) {
    assert.ok(code in HttpErrors, `${code} is in the table (runtime/http/errors.ts)`);
    const status = HttpErrors[code as HttpErrorCode].status;
    assert.ok(doc.includes(`| ${status} | \`${code}\` |`), `docs/http-api.md has the row | ${status} | \`${code}\` |`);
  }
});
