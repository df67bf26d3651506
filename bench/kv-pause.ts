// The host kv store's longest single write when it is full: a million entries of the cache step's
// shape (88-byte key, 230-byte value), distinct keys, every write evicting the least recently
// used entry. The store is filled and turned over once (its arena reaches its steady size: a
// growth copies it, once), then each write of two more turnovers is timed. A whole-store pause
// (a compaction, a collection) is invisible in a median and stalls every client of the proxy's
// event loop.
//
// With --before REV, the same run first against KvStore as it was at git revision REV
// (runtime/wasm/kv-store.ts from `git show`), in a child process of its own, so the two are
// measured in one run on one machine.
//
// Usage: node --import tsx bench/kv-pause.ts [--entries 1000000] [--before REV]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { arg } from './lib.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const entries = Number(arg('--entries', '1000000'));
const before = arg('--before', '');
const moduleArg = arg('--module', '');

interface Store { setAt(src: Uint8Array, at: number, bytes: number, value: Uint8Array, ttlMs: number): boolean }

async function measure(modulePath: string): Promise<void> {
  const { KvStore } = (await import(pathToFileURL(modulePath).href)) as { KvStore: new (max: number) => Store };
  const key = new Uint8Array(88);
  const text = 'e:0.lq3x9k2.1:lq3x9k2.2:lq3x9k2.3:'.padEnd(44, '.');
  for (let j = 0; j < 44; j++) key[2 * j] = text.charCodeAt(j);
  const value = new Uint8Array(230);
  const kv = new KvStore(entries * (88 + 230));
  let longest = 0;
  let sum = 0;
  let over1ms = 0;
  for (let i = 0; i < 4 * entries; i++) {
    for (let d = 0; d < 8; d++) key[2 * (43 - d)] = 48 + ((i >>> (4 * d)) & 15); // a distinct key
    const t0 = performance.now();
    kv.setAt(key, 0, 88, value, 0);
    const dt = performance.now() - t0;
    if (i < 2 * entries) continue; // filling, then one turnover (the arena reaches its steady size)
    sum += dt;
    if (dt > longest) longest = dt;
    if (dt > 1) over1ms++;
  }
  process.stdout.write(JSON.stringify({ meanNs: (sum / (2 * entries)) * 1e6, longestMs: longest, over1ms }) + '\n');
}

function child(modulePath: string): { meanNs: number; longestMs: number; over1ms: number } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, '--entries', String(entries), '--module', modulePath],
    { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`measuring ${modulePath} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

if (moduleArg !== '') {
  await measure(moduleArg);
} else {
  const rows: Array<[string, ReturnType<typeof child>]> = [];
  let tmp: string | null = null;
  if (before !== '') {
    tmp = mkdtempSync(join(tmpdir(), 'kv-pause-'));
    const old = join(tmp, 'kv-store.ts');
    writeFileSync(old, execFileSync('git', ['show', `${before}:runtime/wasm/kv-store.ts`], { cwd: ROOT }));
    rows.push([`KvStore at ${before}`, child(old)]);
  }
  try {
    rows.push(['KvStore (this tree)', child(join(ROOT, 'runtime/wasm/kv-store.ts'))]);
  } finally {
    if (tmp !== null) rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`${entries.toLocaleString('en-US')} entries (88-byte key, 230-byte value), distinct keys, every write ` +
    `evicting; ${(2 * entries).toLocaleString('en-US')} writes after the fill and one turnover, each timed.\n`);
  console.log('| store | mean set() | longest set() | writes over 1 ms |');
  console.log('|---|---:|---:|---:|');
  for (const [name, r] of rows) console.log(`| ${name} | ${r.meanNs.toFixed(0)} ns | ${r.longestMs.toFixed(1)} ms | ${r.over1ms} |`);
}
