// Load-time instrumentation of a plugin module:
//  1. Fuel metering. Node cannot interrupt a synchronous WebAssembly call, so a plugin that never
//     returns would block the event loop. Binaryen's `log-execution` pass inserts a call to an
//     imported `log_execution(i32)` at every function entry, loop header and return; we replace
//     that import with a defined function that decrements an exported mutable global
//     (`__proxy_fuel`) and, when it goes negative, calls the host import `proxy_fuel_exhausted`,
//     which throws (a trap for the host). Every exported callback is wrapped to refill the global
//     on entry (and its initial value covers the start function), so `fuel` is a per-call budget
//     in "function entries + loop iterations + returns".
//     Cost: one small wasm-to-wasm call per function/loop iteration (inlined by binaryen when it
//     fits its inlining limits).
//  2. Memory cap. The module's own memory gets maximum = max_memory_pages (rewritten in the binary
//     memory section); a module that imports its memory or starts above the cap is refused.
import type Binaryen from 'binaryen';

// binaryen.js is a large module (several MB, seconds to import under tsx): load it on the first
// plugin compile, never at process start.
let binaryen: typeof Binaryen;
let loading: Promise<void> | null = null;

export function loadMetering(): Promise<void> {
  if (loading === null) loading = import('binaryen').then((m) => { binaryen = m.default; });
  return loading;
}
import { IMPORT_MODULE, Export, PAGE_BYTES } from './abi.ts';
import { PluginLoadError } from './errors.ts';

const LOG_EXEC = 'log_execution';
function features(): number {
  return binaryen.Features.MVP | binaryen.Features.MutableGlobals | binaryen.Features.BulkMemory |
    binaryen.Features.BulkMemoryOpt | binaryen.Features.SignExt | binaryen.Features.NontrappingFPToInt |
    binaryen.Features.SIMD128 | binaryen.Features.Multivalue | binaryen.Features.ReferenceTypes;
}
const EXHAUSTED_IMPORT = 'proxy_fuel_exhausted';

export interface MeterOptions { readonly name: string; readonly fuel: number; readonly maxMemoryPages: number }

/** Instrument `wasm` for fuel and cap its memory. Returns new module bytes. */
export function instrumentModule(wasm: Uint8Array, opts: MeterOptions): Uint8Array {
  if (binaryen === undefined) throw new Error('call loadMetering() before instrumentModule()');
  let mod: Binaryen.Module;
  try {
    // Node 20's V8 supports these; MVP-only validation would reject ordinary AssemblyScript output.
    mod = binaryen.readBinary(wasm);
    mod.setFeatures(features());
  } catch (err) {
    throw new PluginLoadError(opts.name, 'not a valid WebAssembly module', err);
  }
  try {
    if (!mod.hasMemory()) throw new PluginLoadError(opts.name, 'module has no memory');
    const mem = mod.getMemoryInfo();
    if (mem.module) throw new PluginLoadError(opts.name, `imports its memory (${mem.module}.${mem.base}); memory cannot be capped`);
    if (mem.shared) throw new PluginLoadError(opts.name, 'shared memory is not supported');
    if (mem.initial > opts.maxMemoryPages) {
      throw new PluginLoadError(opts.name, `needs ${mem.initial} pages at start, cap is ${opts.maxMemoryPages} (max_memory_pages)`);
    }
    mod.runPasses(['log-execution']);
    mod.removeFunction(LOG_EXEC);
    mod.addFunctionImport('__proxy_fuel_exhausted', IMPORT_MODULE, EXHAUSTED_IMPORT, binaryen.none, binaryen.none);
    const fuelInit = Math.min(opts.fuel, 0x7fffffff) | 0;
    mod.addGlobal('__proxy_fuel', binaryen.i32, true, mod.i32.const(fuelInit));
    mod.addGlobalExport('__proxy_fuel', Export.fuel);
    const dec = mod.global.set('__proxy_fuel', mod.i32.sub(mod.global.get('__proxy_fuel', binaryen.i32), mod.i32.const(1)));
    const check = mod.if(
      mod.i32.lt_s(mod.global.get('__proxy_fuel', binaryen.i32), mod.i32.const(0)),
      mod.call('__proxy_fuel_exhausted', [], binaryen.none),
    );
    mod.addFunction(LOG_EXEC, binaryen.createType([binaryen.i32]), binaryen.none, [], mod.block(null, [dec, check], binaryen.none));
    refuelOnEntry(mod, fuelInit);
    if (!mod.validate()) throw new PluginLoadError(opts.name, 'metering produced an invalid module');
    binaryen.setAlwaysInlineMaxSize(16);
    mod.runPasses(['inlining', 'vacuum']);
    const out = mod.emitBinary();
    return capMemory(out, opts.maxMemoryPages, opts.name);
  } finally {
    mod.dispose();
  }
}

/** Wrap each exported callback so it refills the fuel itself: setting an exported
 *  WebAssembly.Global from JS costs ~18 ns per call (bench/idle-step.ts), a global.set inside the
 *  wrapper costs nothing measurable. The budget is baked in at load (compile cache key has it). */
function refuelOnEntry(mod: Binaryen.Module, budget: number): void {
  for (const name of [Export.alloc, Export.onConfigure, Export.onRequest, Export.onResponse]) {
    const ref = mod.getExport(name);
    if (ref === 0) continue;
    const info = binaryen.getExportInfo(ref);
    if (info.kind !== binaryen.ExternalFunction) continue;
    const fn = mod.getFunction(info.value);
    const fi = binaryen.getFunctionInfo(fn);
    const params = binaryen.expandType(fi.params);
    const args = params.map((t, i) => mod.local.get(i, t));
    const wrapper = `__proxy_entry_${name}`;
    mod.addFunction(wrapper, fi.params, fi.results, [], mod.block(null, [
      mod.global.set('__proxy_fuel', mod.i32.const(budget)),
      mod.call(info.value, args, fi.results),
    ], fi.results));
    mod.removeExport(name);
    mod.addFunctionExport(wrapper, name);
  }
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
export function capMemory(wasm: Uint8Array, maxPages: number, name: string): Uint8Array {
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
  throw new PluginLoadError(name, 'module defines no memory section; memory cannot be capped');
}

export const MAX_PAGES_LIMIT = (4 * 1024 * 1024 * 1024) / PAGE_BYTES;
