#!/usr/bin/env node
// Runs every test file under test/ (or those given as arguments) with Node's test runner and the
// TypeScript loader. Node 20's --test does not expand globs itself, hence this small walker.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function walk(dir, out) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (name === 'fixtures' || name === 'node_modules') continue;
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.test\.(ts|mjs)$/.test(name)) out.push(p);
  }
  return out;
}

const files = process.argv.length > 2 ? process.argv.slice(2) : walk('test', []);
const args = ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-timeout=180000', ...files];
const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
process.exit(r.status ?? 1);
