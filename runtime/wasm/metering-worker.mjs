// Fuel metering, run in a worker thread with plain Node (no TypeScript loader): binaryen.js is a
// ~10 MB module that imports in ~0.5 s in plain Node but ~10 s through the tsx loader, and the
// instrumentation is CPU work that belongs off the proxy's event loop anyway.
// Protocol: { id, wasm: Uint8Array, fuel, names } → { id, ok: true, wasm } | { id, ok: false, message }.
// See metering.ts for what the instrumentation does and why.
import { parentPort } from 'node:worker_threads';

// binaryen prints what its validator finds (and some warnings) with console.log / console.error,
// which a worker forwards to the proxy's own stdout and stderr: raw text among the JSON log lines
// and the ready banner. It is kept here instead (before binaryen binds the console, at import) and
// becomes part of the refusal.
const printed = [];
const keep = (...args) => { if (printed.length < 20) printed.push(args.join(' ')); };
console.log = keep;
console.error = keep;
console.warn = keep;
const { default: binaryen } = await import('binaryen');

/** What binaryen printed since the last call, on one line (at most 300 characters). */
function takePrinted() {
  const text = printed.join(' ').replace(/\s+/g, ' ').trim();
  printed.length = 0;
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

const LOG_EXEC = 'log_execution';
const EXHAUSTED = '__proxy_fuel_exhausted';
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
    // The plugin's own module first: one using a feature the host does not enable (memory64, multiple
    // memories, exceptions, GC …) is refused naming it, not reported as the host's mistake below.
    takePrinted();
    if (!mod.validate()) throw new Refused(`uses WebAssembly features or instructions this host does not support: ${takePrinted()}`);
    const budget = Math.min(fuel, 0x7fffffff) | 0;
    mod.addGlobal(names.fuel, binaryen.i32, true, mod.i32.const(budget));
    mod.addGlobalExport(names.fuel, names.fuel);
    const plan = planCharges(mod);
    mod.addFunctionImport(EXHAUSTED, names.importModule, names.exhausted, binaryen.none, binaryen.none);
    if (plan !== null) chargeWhereUnbounded(mod, plan, names.fuel);
    else chargeEverywhere(mod, names.fuel);
    if (!component) refuelOnEntry(mod, budget, names);
    if (!mod.validate()) throw new Refused(`metering produced an invalid module: ${takePrinted()}`);
    binaryen.setAlwaysInlineMaxSize(16);
    // Keep the name section when the plugin has one (a `--debug` build): traps and CPU profiles
    // then name plugin functions.
    binaryen.setDebugInfo(true);
    // Inlines the fallback's log_execution and small plugin functions (charges travel with the
    // body they sit in); without it the eight built-in steps measured no faster in process.
    mod.runPasses(['inlining', 'vacuum']);
    return mod.emitBinary();
  } finally {
    mod.dispose();
  }
}

// Where fuel is charged. A call can only run unbounded through a loop or through calls of plugin
// functions (recursion, or call trees that multiply), so a charge sits at the top of every loop
// body (once per iteration) and at the entry of every function that calls a function of the
// module (`call` of a defined function, `call_indirect`, `return_call`). A function with neither
// runs a bounded number of instructions, at most its own size, and is charged nothing; nor is any
// return: a return ends an activation whose entry was charged or bounded. So the instructions a call
// runs stay within a module-size factor of the fuel it is charged, and a call whose work is
// unbounded runs out. Host imports are the host's own work and are not counted.
// binaryen's `log-execution` pass (the instrumentation before) also charged every leaf function's
// entry and every return and function end: about 2.3× the charge sites in the built-in steps. It
// cannot be run on chosen functions only (runPassesOnFunction needs a function-parallel pass).

/** The loops to charge and the functions to charge at entry; null when a function holds an
 *  expression kind the walk cannot read (binaryen.js exposes no getters for table.fill,
 *  table.copy, table.init): such a module is charged everywhere instead (chargeEverywhere). */
function planCharges(mod) {
  const imported = new Set();
  const defined = [];
  for (let i = 0, n = mod.getNumFunctions(); i < n; i++) {
    const ref = mod.getFunctionByIndex(i);
    if (binaryen.Function.getBody(ref) === 0) imported.add(binaryen.Function.getName(ref));
    else defined.push(ref);
  }
  const loops = [];
  const entries = [];
  const stack = [];
  for (const ref of defined) {
    const callsDefined = walkBody(binaryen.Function.getBody(ref), imported, loops, stack);
    if (callsDefined === null) return null;
    if (callsDefined) entries.push(ref);
  }
  return { loops, entries };
}

/** Collects the loops under `body` into `loops`; whether it calls a function of the module
 *  (null: an expression kind CHILDREN does not know). Iterative: bodies nest thousands deep. */
function walkBody(body, imported, loops, stack) {
  let callsDefined = false;
  stack.push(body);
  while (stack.length > 0) {
    const e = stack.pop();
    if (e === 0) continue; // an absent optional child (if without else, br without value, …)
    const id = binaryen.getExpressionId(e);
    if (id === binaryen.LoopId) {
      loops.push(e);
      stack.push(binaryen.Loop.getBody(e));
    } else if (id === binaryen.CallId) {
      if (binaryen.Call.isReturn(e) || !imported.has(binaryen.Call.getTarget(e))) callsDefined = true;
      for (let i = 0, n = binaryen.Call.getNumOperands(e); i < n; i++) stack.push(binaryen.Call.getOperandAt(e, i));
    } else if (id === binaryen.CallIndirectId) {
      callsDefined = true;
      stack.push(binaryen.CallIndirect.getTarget(e));
      for (let i = 0, n = binaryen.CallIndirect.getNumOperands(e); i < n; i++) stack.push(binaryen.CallIndirect.getOperandAt(e, i));
    } else {
      const children = CHILDREN[id];
      if (children === undefined) {
        stack.length = 0;
        return null;
      }
      children(e, stack);
    }
  }
  return callsDefined;
}

/** Per expression id: pushes its child expressions (every kind the enabled features allow, except
 *  table.fill/copy/init, whose operands binaryen.js gives no getters for; loops and calls are read
 *  in walkBody). */
const CHILDREN = [];
{
  const leaf = () => {};
  const of = (...getters) => (e, stack) => { for (const get of getters) stack.push(get(e)); };
  const list = (count, at) => (e, stack) => { for (let i = 0, n = count(e); i < n; i++) stack.push(at(e, i)); };
  const b = binaryen;
  const kinds = [
    [b.BlockId, list(b.Block.getNumChildren, b.Block.getChildAt)],
    [b.IfId, of(b.If.getCondition, b.If.getIfTrue, b.If.getIfFalse)],
    [b.BreakId, of(b.Break.getCondition, b.Break.getValue)],
    [b.SwitchId, of(b.Switch.getCondition, b.Switch.getValue)],
    [b.LocalGetId, leaf],
    [b.LocalSetId, of(b.LocalSet.getValue)],
    [b.GlobalGetId, leaf],
    [b.GlobalSetId, of(b.GlobalSet.getValue)],
    [b.LoadId, of(b.Load.getPtr)],
    [b.StoreId, of(b.Store.getPtr, b.Store.getValue)],
    [b.ConstId, leaf],
    [b.UnaryId, of(b.Unary.getValue)],
    [b.BinaryId, of(b.Binary.getLeft, b.Binary.getRight)],
    [b.SelectId, of(b.Select.getIfTrue, b.Select.getIfFalse, b.Select.getCondition)],
    [b.DropId, of(b.Drop.getValue)],
    [b.ReturnId, of(b.Return.getValue)],
    [b.MemorySizeId, leaf],
    [b.MemoryGrowId, of(b.MemoryGrow.getDelta)],
    [b.NopId, leaf],
    [b.UnreachableId, leaf],
    [b.AtomicRMWId, of(b.AtomicRMW.getPtr, b.AtomicRMW.getValue)],
    [b.AtomicCmpxchgId, of(b.AtomicCmpxchg.getPtr, b.AtomicCmpxchg.getExpected, b.AtomicCmpxchg.getReplacement)],
    [b.AtomicWaitId, of(b.AtomicWait.getPtr, b.AtomicWait.getExpected, b.AtomicWait.getTimeout)],
    [b.AtomicNotifyId, of(b.AtomicNotify.getPtr, b.AtomicNotify.getNotifyCount)],
    [b.AtomicFenceId, leaf],
    [b.SIMDExtractId, of(b.SIMDExtract.getVec)],
    [b.SIMDReplaceId, of(b.SIMDReplace.getVec, b.SIMDReplace.getValue)],
    [b.SIMDShuffleId, of(b.SIMDShuffle.getLeft, b.SIMDShuffle.getRight)],
    [b.SIMDTernaryId, of(b.SIMDTernary.getA, b.SIMDTernary.getB, b.SIMDTernary.getC)],
    [b.SIMDShiftId, of(b.SIMDShift.getVec, b.SIMDShift.getShift)],
    [b.SIMDLoadId, of(b.SIMDLoad.getPtr)],
    [b.SIMDLoadStoreLaneId, of(b.SIMDLoadStoreLane.getPtr, b.SIMDLoadStoreLane.getVec)],
    [b.MemoryInitId, of(b.MemoryInit.getDest, b.MemoryInit.getOffset, b.MemoryInit.getSize)],
    [b.DataDropId, leaf],
    [b.MemoryCopyId, of(b.MemoryCopy.getDest, b.MemoryCopy.getSource, b.MemoryCopy.getSize)],
    [b.MemoryFillId, of(b.MemoryFill.getDest, b.MemoryFill.getValue, b.MemoryFill.getSize)],
    [b.RefNullId, leaf],
    [b.RefIsNullId, of(b.RefIsNull.getValue)],
    [b.RefFuncId, leaf],
    [b.RefEqId, of(b.RefEq.getLeft, b.RefEq.getRight)],
    [b.RefAsId, of(b.RefAs.getValue)],
    [b.TableGetId, of(b.TableGet.getIndex)],
    [b.TableSetId, of(b.TableSet.getIndex, b.TableSet.getValue)],
    [b.TableSizeId, leaf],
    [b.TableGrowId, of(b.TableGrow.getValue, b.TableGrow.getDelta)],
    [b._BinaryenElemDropId(), leaf],
    [b.TupleMakeId, list(b.TupleMake.getNumOperands, b.TupleMake.getOperandAt)],
    [b.TupleExtractId, of(b.TupleExtract.getTuple)],
  ];
  for (const [id, children] of kinds) CHILDREN[id] = children;
}

/** `fuel -= 1; if (fuel < 0) proxy_fuel_exhausted()` (the import throws: a trap for the host). */
function charge(mod, fuelName) {
  return [
    mod.global.set(fuelName, mod.i32.sub(mod.global.get(fuelName, binaryen.i32), mod.i32.const(1))),
    mod.if(mod.i32.lt_s(mod.global.get(fuelName, binaryen.i32), mod.i32.const(0)), mod.call(EXHAUSTED, [], binaryen.none)),
  ];
}

function chargeWhereUnbounded(mod, plan, fuelName) {
  for (const loop of plan.loops) binaryen.Loop.setBody(loop, mod.block(null, [...charge(mod, fuelName), binaryen.Loop.getBody(loop)], binaryen.auto));
  for (const ref of plan.entries) {
    binaryen.Function.setBody(ref, mod.block(null, [...charge(mod, fuelName), binaryen.Function.getBody(ref)], binaryen.auto));
  }
}

/** The fallback: binaryen's `log-execution` pass puts a call of an imported `log_execution(i32)`
 *  at every function entry, loop header, return and function end; the import is replaced by a
 *  defined function that charges one unit (inlined at the end of instrument()). */
function chargeEverywhere(mod, fuelName) {
  mod.runPasses(['log-execution']);
  mod.removeFunction(LOG_EXEC);
  mod.addFunction(LOG_EXEC, binaryen.createType([binaryen.i32]), binaryen.none, [], mod.block(null, charge(mod, fuelName), binaryen.none));
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
    takePrinted();
    parentPort.postMessage({ id, ok: false, refused: err instanceof Refused, message: err.message });
  }
});
