// Load-time instrumentation of a plugin module:
//  1. Fuel metering (done by metering-worker.mjs in a worker thread). Node cannot interrupt a synchronous WebAssembly call, so a plugin that never
//     returns would block the event loop. The worker inserts a charge at the top of every loop body
//     and at the entry of every function that calls a function of the module (a defined function,
//     call_indirect, return_call): it decrements an exported mutable global (`__proxy_fuel`) and,
//     when that goes negative, calls the host import `proxy_fuel_exhausted`, which throws (a trap
//     for the host). Functions without loops or such calls, and returns, run bounded work and are
//     not charged. Every exported callback is wrapped to refill the global on entry (and its
//     initial value covers the start function), so `fuel` is a per-call budget in "loop iterations
//     + entries into calling functions". A module the walk cannot read (table.fill/copy/init) is
//     charged as binaryen's `log-execution` pass does: every function entry, return and loop
//     iteration. Cost: two global accesses and a compare per charge.
//  2. Memory cap. The module's own memory gets maximum = max_memory_pages (rewritten in the binary
//     memory section); a module that imports its memory or starts above the cap is refused.
import { Worker } from 'node:worker_threads';
import { IMPORT_MODULE, Export } from './abi.ts';
import { PluginLoadError } from './errors.ts';

/** Bump when the instrumentation changes: it names the on-disk cache of metered component cores. */
export const METERING_VERSION = 2;

export interface MeterOptions {
  readonly name: string;
  readonly fuel: number;
  readonly maxMemoryPages: number;
  /** A core module of a component: memory optional, refuelled by the host (metering-worker.mjs). */
  readonly component?: boolean;
}

const NAMES = {
  importModule: IMPORT_MODULE,
  exhausted: 'proxy_fuel_exhausted',
  fuel: Export.fuel,
  callbacks: [Export.alloc, Export.onConfigure, Export.onRequest, Export.onResponse, Export.onRequestDone],
};

// The binaryen work runs in one lazily started worker thread (metering-worker.mjs): see there.
// binaryen adds ~140 MB to the process's resident size while it works and still ~40 MB once idle
// (measured: `proxy serve` with the eight built-ins settles at 236 MB with the worker stopped, 277
// MB with it idle), memory a proxy needs only while it loads modules: at startup, on a reload with
// a changed plugin, for a canary's candidate — and each worker process has its own. So the worker
// stops once it has been idle for `idleMs`; the next load starts it again (~0.5 s of CPU on a
// quiet host, ~1.5 s on a busy one), and unchanged modules are not metered again at all
// (compile.ts caches compiled modules by content).
let worker: Worker | null = null;
let nextId = 1;
const waiting = new Map<number, { resolve(b: Uint8Array): void; reject(e: Error): void; name: string }>();
let idleMs = 15_000;
let idleTimer: NodeJS.Timeout | null = null;

/** How long an idle metering worker is kept (tests shorten it); returns the previous value. */
export function setMeteringIdleMs(ms: number): number {
  const was = idleMs;
  idleMs = ms;
  return was;
}

/** Is a metering worker running (started and not stopped for idleness)? */
export function meteringWorkerRunning(): boolean {
  return worker !== null;
}

function rejectAll(message: string, err?: Error): void {
  for (const [id, p] of waiting) {
    waiting.delete(id);
    p.reject(new PluginLoadError(p.name, message, err));
  }
}

function meteringWorker(): Worker {
  if (idleTimer !== null) {
    clearTimeout(idleTimer);
    idleTimer = null;
  }
  if (worker !== null) return worker;
  const w = new Worker(new URL('./metering-worker.mjs', import.meta.url), { execArgv: [] });
  w.on('message', (m: { id: number; ok: boolean; wasm?: Uint8Array; refused?: boolean; message?: string }) => {
    const p = waiting.get(m.id);
    if (p === undefined) return;
    waiting.delete(m.id);
    if (waiting.size === 0) {
      w.unref();
      idleTimer = setTimeout(() => {
        idleTimer = null;
        if (worker !== w || waiting.size > 0) return;
        worker = null;
        void w.terminate();
      }, idleMs);
      idleTimer.unref();
    }
    if (m.ok) p.resolve(m.wasm!);
    else p.reject(new PluginLoadError(p.name, m.refused ? m.message! : `metering failed: ${m.message}`));
  });
  // A worker stopped for idleness had nothing waiting, and what waits now waits for its successor:
  // only the current worker's failure or exit rejects the jobs.
  w.on('error', (err) => {
    if (worker !== w) return;
    worker = null;
    rejectAll(`metering worker failed: ${err.message}`, err);
  });
  w.on('exit', (code) => {
    if (worker !== w) return;
    worker = null;
    rejectAll(`metering worker exited (code ${code})`);
  });
  // Referenced only while a request is outstanding: an idle worker must not keep the process
  // alive (and unref() must come after the listeners, which ref the port again).
  w.unref();
  worker = w;
  return w;
}

/** Instrument `wasm` for fuel and cap its memory (off the event loop). Resolves to new module bytes. */
export async function instrumentModule(wasm: Uint8Array, opts: MeterOptions): Promise<Uint8Array> {
  const w = meteringWorker();
  const id = nextId++;
  const metered = await new Promise<Uint8Array>((resolve, reject) => {
    if (waiting.size === 0) w.ref();
    waiting.set(id, { resolve, reject, name: opts.name });
    w.postMessage({ id, wasm, fuel: opts.fuel, maxMemoryPages: opts.maxMemoryPages, names: NAMES, component: opts.component === true });
  });
  return capMemory(metered, opts.maxMemoryPages, opts.name, opts.component === true);
}

// Binary format: https://webassembly.github.io/spec/core/binary/modules.html#memory-section
const SECTION_MEMORY = 5;

function readU32(b: Uint8Array, pos: number): [number, number] {
  let result = 0, shift = 0, byte: number;
  do {
    byte = b[pos++]!;
    result |= (byte & 0x7f) << shift;
    shift += 7;
  } while (byte & 0x80);
  return [result >>> 0, pos];
}

function writeU32(out: number[], v: number): void {
  do {
    let byte = v & 0x7f;
    v >>>= 7;
    if (v !== 0) byte |= 0x80;
    out.push(byte);
  } while (v !== 0);
}

/** Rewrite the memory section so memory 0 has maximum = min(existing max, cap). */
export function capMemory(wasm: Uint8Array, maxPages: number, name: string, memoryOptional = false): Uint8Array {
  let pos = 8; // magic + version
  while (pos < wasm.length) {
    const id = wasm[pos]!;
    const [size, bodyStart] = readU32(wasm, pos + 1);
    const bodyEnd = bodyStart + size;
    if (id === SECTION_MEMORY) {
      let [count, p] = readU32(wasm, bodyStart);
      if (count !== 1) throw new PluginLoadError(name, `has ${count} memories; exactly one is supported`);
      const flags = wasm[p++]!;
      if (flags & ~1) throw new PluginLoadError(name, `memory flags ${flags} not supported (shared/64-bit)`);
      const [initial, p2] = readU32(wasm, p);
      let max = maxPages;
      if (flags & 1) max = Math.min(readU32(wasm, p2)[0], maxPages);
      if (initial > max) throw new PluginLoadError(name, `memory initial ${initial} pages exceeds cap ${max}`);
      const body: number[] = [];
      writeU32(body, 1);
      body.push(1);
      writeU32(body, initial);
      writeU32(body, max);
      const header: number[] = [SECTION_MEMORY];
      writeU32(header, body.length);
      const out = new Uint8Array(pos + header.length + body.length + (wasm.length - bodyEnd));
      out.set(wasm.subarray(0, pos), 0);
      out.set(header, pos);
      out.set(body, pos + header.length);
      out.set(wasm.subarray(bodyEnd), pos + header.length + body.length);
      return out;
    }
    pos = bodyEnd;
  }
  if (memoryOptional) return wasm;
  throw new PluginLoadError(name, 'module defines no memory section; memory cannot be capped');
}
