// The built-in steps are written against the SDK only: no raw host imports (sdk/assembly/host,
// sdk/assembly/abi) and no proxy_* calls, so the SDK is the one place that speaks the ABI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (p.endsWith('.ts') && p.includes('/assembly/') || p.startsWith('plugins/_shared/')) out.push(p);
  }
  return out;
}

test('built-in plugins use only the SDK, never raw proxy_* host imports', () => {
  const files = sources('plugins');
  assert.ok(files.length > 10);
  const offences: string[] = [];
  for (const f of files) {
    const src = readFileSync(f, 'utf8');
    if (/from\s+"[^"]*sdk\/assembly\/(host|abi)"/.test(src)) offences.push(`${f}: imports sdk/assembly/host or abi`);
    for (const m of src.matchAll(/\bproxy_(?!plugin_)[a-z_]+\s*\(/g)) offences.push(`${f}: calls ${m[0]}`);
  }
  assert.deepEqual(offences, []);
});
