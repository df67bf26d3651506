// Assembles WebAssembly text (WAT) for tests that need a module no SDK would build: a plugin that
// lies to the host. binaryen does it, in a worker of plain Node: it imports in ~0.5 s there and
// ~25 s through the tsx loader (the same reason as runtime/wasm/metering-worker.mjs).
import { Worker } from 'node:worker_threads';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
import('binaryen').then(({ default: binaryen }) => {
  const out = workerData.map((text) => {
    const m = binaryen.parseText(text);
    // (memory64 and multiple memories too: modules the host must refuse)
    m.setFeatures(binaryen.Features.MVP | binaryen.Features.MutableGlobals | binaryen.Features.BulkMemory | binaryen.Features.SignExt |
      binaryen.Features.Memory64 | binaryen.Features.MultiMemory);
    if (!m.validate()) throw new Error('invalid module: ' + text.slice(0, 200));
    const bin = m.emitBinary();
    m.dispose();
    return bin;
  });
  parentPort.postMessage(out);
});
`;

/** The binaries of `texts`, in order (one worker for all). */
export function wat2wasm(texts: readonly string[]): Promise<Uint8Array[]> {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER, { eval: true, execArgv: [], workerData: texts });
    w.once('message', (m: Uint8Array[]) => { resolve(m); void w.terminate(); });
    w.once('error', reject);
  });
}

/** Assembles each text of `modules` into `<dir>/<name>.wasm` (a fresh temporary folder); returns the paths by name. */
export async function watFiles<K extends string>(modules: Record<K, string>): Promise<Record<K, string>> {
  const dir = mkdtempSync(join(tmpdir(), 'wat-'));
  const names = Object.keys(modules) as K[];
  const bins = await wat2wasm(names.map((n) => modules[n]));
  const out = {} as Record<K, string>;
  names.forEach((n, i) => {
    const p = join(dir, `${n}.wasm`);
    writeFileSync(p, bins[i]!);
    out[n] = p;
  });
  return out;
}
