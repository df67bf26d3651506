// The proxy's version has one source, package.json: `proxy --version` prints it, and no runtime
// file carries a copy of it (the banner, the upstream handshake and the notification User-Agent
// read runtime/version.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VERSION, USER_AGENT } from '../../runtime/version.ts';

const root = process.cwd();
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };

test('proxy --version prints package.json\'s version', () => {
  const r = spawnSync(process.execPath, [join(root, 'bin/proxy.mjs'), '--version'], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^proxy/${pkg.version.replaceAll('.', '\\.')} `));
  assert.equal(VERSION, pkg.version);
  assert.equal(USER_AGENT, `pipeline-proxy/${pkg.version}`);
});

test('no runtime file writes the version out: runtime/version.ts is its one reader', () => {
  const files = (readdirSync(join(root, 'runtime'), { recursive: true }) as string[]).filter((f) => /\.(ts|js|mjs)$/.test(f));
  const literal = new RegExp(`['"\`/]${pkg.version.replaceAll('.', '\\.')}['"\`]`);
  const copies = files.filter((f) => literal.test(readFileSync(join(root, 'runtime', f), 'utf8')));
  assert.deepEqual(copies, []);
});
