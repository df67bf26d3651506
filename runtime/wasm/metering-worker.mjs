// Fuel metering, run in a worker thread with plain Node (no TypeScript loader): binaryen.js is a
// ~10 MB module that imports in ~0.5 s in plain Node but ~10 s through the tsx loader, and the
// instrumentation is CPU work that belongs off the proxy's event loop anyway.
// Protocol: { id, wasm: Uint8Array, fuel, names } → { id, ok: true, wasm } | { id, ok: false, message }.
// See metering.ts for what the instrumentation does and why.
import { parentPort } from 'node:worker_threads';
import binaryen from 'binaryen';

const LOG_EXEC = 'log_execution';
const FEATURES = binaryen.Features.MVP | binaryen.Features.MutableGlobals | binaryen.Features.BulkMemory |
  binaryen.Features.BulkMemoryOpt | binaryen.Features.SignExt | binaryen.Features.NontrappingFPToInt |
  binaryen.Features.SIMD128 | binaryen.Features.Multivalue | binaryen.Features.ReferenceTypes;

class Refused extends Error {}

// `component`: a core module of a transpiled component. It may define no memory (jco's shim
// modules), and no export is wrapped to refuel: the host refuels through the exported global
// before each step call (a component's exports include cabi_realloc, which the bindings call in
// the middle of a step call and which must not refill the budget).
function instrument(wasm, fuel, maxMemoryPages, names, component) {
  let mod;
  try {
    mod = binaryen.readBinary(wasm);
    mod.setFeatures(FEATURES);
  } catch (err) {
    throw new Refused(`not a valid WebAssembly module: ${err.message}`);
  }
  try {
    if (!mod.hasMemory()) {
      if (!component) throw new Refused('module has no memory');
    } else {
      const mem = mod.getMemoryInfo();
      if (mem.module) throw new Refused(`imports its memory (${mem.module}.${mem.base}); memory cannot be capped`);
      if (mem.shared) throw new Refused('shared memory is not supported');
      if (mem.initial > maxMemoryPages) throw new Refused(`needs ${mem.initial} pages at start, cap is ${maxMemoryPages} (max_memory_pages)`);
    }
    mod.runPasses(['log-execution']);
    mod.removeFunction(LOG_EXEC);
    mod.addFunctionImport('__proxy_fuel_exhausted', names.importModule, names.exhausted, binaryen.none, binaryen.none);
    const budget = Math.min(fuel, 0x7fffffff) | 0;
    mod.addGlobal(names.fuel, binaryen.i32, true, mod.i32.const(budget));
    mod.addGlobalExport(names.fuel, names.fuel);
    const dec = mod.global.set(names.fuel, mod.i32.sub(mod.global.get(names.fuel, binaryen.i32), mod.i32.const(1)));
    const check = mod.if(
      mod.i32.lt_s(mod.global.get(names.fuel, binaryen.i32), mod.i32.const(0)),
      mod.call('__proxy_fuel_exhausted', [], binaryen.none),
    );
    mod.addFunction(LOG_EXEC, binaryen.createType([binaryen.i32]), binaryen.none, [], mod.block(null, [dec, check], binaryen.none));
    if (!component) refuelOnEntry(mod, budget, names);
    if (!mod.validate()) throw new Refused('metering produced an invalid module');
    binaryen.setAlwaysInlineMaxSize(16);
    // Keep the name section when the plugin has one (a `--debug` build): traps and CPU profiles
    // then name plugin functions.
    binaryen.setDebugInfo(true);
    mod.runPasses(['inlining', 'vacuum']);
    return mod.emitBinary();
  } finally {
    mod.dispose();
  }
}

// Wrap each exported callback so it refills the fuel itself: setting an exported WebAssembly.Global
// from JS costs ~18 ns per call (bench/idle-step.ts); a global.set inside the wrapper costs nothing
// measurable. The budget is baked in at load (the compile cache key includes it).
function refuelOnEntry(mod, budget, names) {
  for (const name of names.callbacks) {
    const ref = mod.getExport(name);
    if (ref === 0) continue;
    const info = binaryen.getExportInfo(ref);
    if (info.kind !== binaryen.ExternalFunction) continue;
    const fi = binaryen.getFunctionInfo(mod.getFunction(info.value));
    const args = binaryen.expandType(fi.params).map((t, i) => mod.local.get(i, t));
    const wrapper = `__proxy_entry_${name}`;
    mod.addFunction(wrapper, fi.params, fi.results, [], mod.block(null, [
      mod.global.set(names.fuel, mod.i32.const(budget)),
      mod.call(info.value, args, fi.results),
    ], fi.results));
    mod.removeExport(name);
    mod.addFunctionExport(wrapper, name);
  }
}

parentPort.on('message', ({ id, wasm, fuel, maxMemoryPages, names, component }) => {
  try {
    const out = instrument(wasm, fuel, maxMemoryPages, names, component === true);
    parentPort.postMessage({ id, ok: true, wasm: out }, [out.buffer]);
  } catch (err) {
    parentPort.postMessage({ id, ok: false, refused: err instanceof Refused, message: err.message });
  }
});
