// Reload on file change keeps working whatever way the file is saved (issue 19, item 4): written in
// place, written to a temporary file and renamed over it (editors, `sed -i`), or swapped through a
// `..data` symlink as a Kubernetes ConfigMap volume does. Several consecutive saves each, every
// one applied exactly once; a save that changes nothing and a SIGHUP after an applied save reload
// nothing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, watchReload, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { until } from '../helpers/until.ts';

let proxy: RunningProxy;
let root: string;
/** The proxy's log lines and the watch's ("configuration reloaded" is the proxy's). */
const lines: string[] = [];
const log = new Logger('test', 'info', 'json', { write: (l: string) => { lines.push(l); } });

/** A configuration told apart by shutdown.drain_timeout_ms, which applies on reload. */
const text = (n: number) => JSON.stringify({ listen: '127.0.0.1:0', log: { level: 'error' }, shutdown: { drain_timeout_ms: 1000 + n } }, null, 2);

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'proxy-reload-watch-'));
  proxy = await startProxy(parseConfig(JSON.parse(text(0)), null), { log });
});

after(async () => {
  await proxy?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Watches `file`; stop() ends the watch, reloads() counts the reloads applied so far. */
function watched(file: string) {
  const stop = watchReload(proxy, file, log, { debounceMs: 50 });
  const reloads = () => lines.filter((l) => l.includes('"configuration reloaded"')).length;
  return { lines, stop, reloads };
}

const drain = () => proxy.config.shutdown.drain_timeout_ms;

const settle = () => new Promise((r) => setTimeout(r, 300));

/** Saves `n` with `save`, then waits until the proxy runs it; checks it took one reload. */
async function saveAndApply(w: ReturnType<typeof watched>, save: (n: number) => void, n: number): Promise<void> {
  const before = w.reloads();
  save(n);
  await until(`save ${n} to apply`, () => drain() === 1000 + n);
  await settle(); // a second reload of the same save would show up here
  assert.equal(w.reloads(), before + 1, `save ${n}: one reload\n${w.lines.join('\n')}`);
}

test('in-place writes: every save reloads once; an identical save and a SIGHUP after it reload nothing', async () => {
  const dir = join(root, 'in-place');
  mkdirSync(dir);
  const file = join(dir, 'proxy.json');
  writeFileSync(file, text(0));
  const w = watched(file);
  try {
    for (let n = 1; n <= 4; n++) await saveAndApply(w, (i) => writeFileSync(file, text(i)), n);
    const before = w.reloads();
    writeFileSync(file, text(4)); // same content
    process.emit('SIGHUP', 'SIGHUP');
    await settle();
    assert.equal(w.reloads(), before, w.lines.join('\n'));
    assert.ok(w.lines.some((l) => l.includes('configuration unchanged since the last reload')), 'the SIGHUP says why nothing was applied');
  } finally {
    w.stop();
  }
});

test('write a temporary file and rename it over (editors, sed -i): every save is seen, not only the first', async () => {
  const dir = join(root, 'rename');
  mkdirSync(dir);
  const file = join(dir, 'proxy.json');
  writeFileSync(file, text(0));
  const w = watched(file);
  try {
    for (let n = 11; n <= 14; n++) {
      await saveAndApply(w, (i) => {
        const tmp = join(dir, `.proxy.json.${i}.tmp`);
        writeFileSync(tmp, text(i));
        renameSync(tmp, file);
      }, n);
    }
    // sed -i writes its own temporary file and renames it over the original.
    await saveAndApply(w, (i) => execFileSync('sed', ['-i', `s/"drain_timeout_ms": 1014/"drain_timeout_ms": ${1000 + i}/`, file]), 15);
    await saveAndApply(w, (i) => execFileSync('sed', ['-i', `s/"drain_timeout_ms": 1015/"drain_timeout_ms": ${1000 + i}/`, file]), 16);
    // Another file in the directory changing reloads nothing.
    const before = w.reloads();
    writeFileSync(join(dir, 'other.json'), '{}');
    await settle();
    assert.equal(w.reloads(), before);
  } finally {
    w.stop();
  }
});

test('a Kubernetes ConfigMap volume: proxy.json -> ..data/proxy.json, each update swaps the ..data symlink to a new directory', async () => {
  const dir = join(root, 'configmap');
  mkdirSync(dir);
  let version = 0;
  const publish = (n: number) => {
    // What the kubelet does: write a new timestamped directory, point a temporary symlink at it,
    // rename that over ..data (atomic), delete the previous directory.
    const next = `..2026_11_27_00_00_0${++version}`;
    mkdirSync(join(dir, next));
    writeFileSync(join(dir, next, 'proxy.json'), text(n));
    symlinkSync(next, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    if (version > 1) rmSync(join(dir, `..2026_11_27_00_00_0${version - 1}`), { recursive: true });
  };
  publish(20);
  symlinkSync('..data/proxy.json', join(dir, 'proxy.json'));
  const file = join(dir, 'proxy.json');
  const w = watched(file);
  try {
    for (let n = 21; n <= 24; n++) await saveAndApply(w, publish, n);
  } finally {
    w.stop();
  }
});

test('admin.reload_on_change: false, applied by a reload, stops file reloads; SIGHUP still reloads', async () => {
  const dir = join(root, 'off');
  mkdirSync(dir);
  const file = join(dir, 'proxy.json');
  const off = (n: number) => JSON.stringify({ ...JSON.parse(text(n)), admin: { reload_on_change: false } });
  writeFileSync(file, text(30));
  const w = watched(file);
  try {
    await saveAndApply(w, (i) => writeFileSync(file, off(i)), 31);
    writeFileSync(file, off(32));
    await settle();
    assert.equal(drain(), 1031, 'the save is not applied');
    process.emit('SIGHUP', 'SIGHUP');
    await until('the SIGHUP to apply the file', () => drain() === 1032);
  } finally {
    w.stop();
  }
});
