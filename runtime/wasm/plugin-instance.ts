// One live WebAssembly instance of a core-module plugin, and the marshalling of the host functions
// it imports: pointers and lengths into its linear memory, strings as UTF-16LE. What each function
// does is StepHost's (step-host.ts), shared with components.
// Hot-path rules (notes/wasm-host.md): copy into plugin memory with Uint8Array.set, never slice out
// of it except to keep a result (replaced body, local reply, a body_find needle kept for the next
// call); kv values are copied by the store itself; no clock reads here unless a sub-op sink is
// installed; imports are closures created once per instance, not per call.
import { IMPORT_MODULE, Export, PhaseMask, type MetricKind, type Phase } from './abi.ts';
import { PluginTrap, FuelExhaustedError, PluginConfigRefusedError, PluginLoadError } from './errors.ts';
import { type HostExchange, requestCallSize, requestCallFlags, responseCallSize, responseCallFlags } from './host-exchange.ts';
import type { KvStore } from './kv-store.ts';
import type { PluginMetricRegistry } from './plugin-metrics.ts';
import { StepHost, MAX_PLUGIN_LOG_CHARS } from './step-host.ts';
import { RequestContexts } from './request-contexts.ts';
import type { HostLog } from './logger.ts';
import type { CompiledPlugin } from './compile.ts';
import type { Variant } from '../config/index.ts';

/** Receives sub-operation timings (name, phase, duration ns). Null = recording off. */
export type SubopSink = (name: string, phase: Phase, durationNs: number) => void;

/** The recorder's view of the request running now (StepRecorder.current, set by the timed loop). */
export interface SubopGate {
  readonly current: { readonly subops: boolean } | null;
}

/** What the host gives one step of one graph, bound when the graph is built (shared by the
 *  successive instances of the step). */
export interface PluginServices {
  readonly step: string; // "wasm:<name>"
  readonly pipelineId: string;
  /** The graph's variant (the `pipeline` label of its metrics). */
  readonly variant: Variant;
  readonly logger: HostLog;
  /** This step's kv store in this graph (WasmHost.kv). */
  readonly kv: KvStore;
  /** Where its plugin metrics are defined (WasmHost.pluginMetrics). */
  readonly metrics: PluginMetricRegistry;
  /** proxy_step_instance_rebuilds_total for this step and graph. */
  readonly rebuilds: { inc(): void };
  readonly subop: SubopSink | null;
  /**
   * Whether the request running now records its sub-operations: its `current` request's `subops`
   * flag, or `subopDirect` while no request is current (the SDK harness, benches); absent or null:
   * every request does. Tracing without profiling times only its sampled requests, so an unsampled
   * one skips the clock reads and the name decoding of each sub-operation. (A field read per step
   * call, not a closure call: it is asked before every call while the recorder is on.)
   */
  readonly subopGate?: SubopGate | null;
  readonly subopDirect?: boolean;
  readonly fuel: number;
}

type Fn = (...args: number[]) => number;

/** Distinct sub-operation names a plugin instance keeps decoded. */
const SUBOP_NAMES_CACHED = 8;
/** Distinct proxy_body_find needles a plugin instance keeps copied. */
const NEEDLES_CACHED = 4;

export class PluginInstance {
  readonly plugin: CompiledPlugin;
  readonly services: PluginServices;
  /** The host functions this instance imports (module `proxy`): exactly abi-spec.ts's HOST_FUNCTIONS. */
  readonly hostImports: Record<string, (...args: never[]) => unknown>;
  private readonly instance: WebAssembly.Instance;
  /** Null while the module's start function runs (the instance and its exports do not exist yet). */
  private readonly memory: WebAssembly.Memory | null = null;
  private u8: Uint8Array;
  /** The same memory as a Buffer (for its fast UTF-16 decoding); refreshed with u8. */
  private buf: Buffer;
  private readonly alloc: Fn | null;
  private readonly onConfigureFn: Fn | null;
  private readonly onRequestFn: Fn | null;
  private readonly onResponseFn: Fn | null;
  private readonly onRequestDoneFn: Fn | null;
  /** Per-request contexts, when the plugin asked for them and acts in both phases (else null). */
  private contexts: RequestContexts | null;
  private readonly host: StepHost;
  /** Sub-operation names decoded so far (at most SUBOP_NAMES_CACHED), with the bytes they came from. */
  private readonly subopNames: { ptr: number; bytes: Uint8Array; name: string }[] = [];
  /** proxy_body_find needles copied so far (at most NEEDLES_CACHED), by the address they came from. */
  private readonly needles: { ptr: number; bytes: Uint8Array }[] = [];
  /** Instantiates (runs the module's start function); throws on a trap. */
  constructor(plugin: CompiledPlugin, services: PluginServices) {
    this.plugin = plugin;
    this.services = services;
    this.host = new StepHost(services);
    this.contexts = null;
    this.hostImports = this.imports();
    this.u8 = EMPTY;
    this.buf = Buffer.alloc(0);
    try {
      this.instance = new WebAssembly.Instance(plugin.module, { [IMPORT_MODULE]: this.hostImports });
    } catch (err) {
      // The start function trapped, ran out of fuel or called a host function that needs memory.
      throw new PluginLoadError(services.step, `its start function failed: ${errorText(err)}`, err);
    }
    const e = this.instance.exports;
    const mem = e[Export.memory];
    if (!(mem instanceof WebAssembly.Memory)) throw new PluginTrap(`plugin ${services.step} exports no memory`);
    this.memory = mem;
    this.u8 = new Uint8Array(mem.buffer);
    this.buf = Buffer.from(mem.buffer);
    this.alloc = (e[Export.alloc] as Fn | undefined) ?? null;
    this.onConfigureFn = (e[Export.onConfigure] as Fn | undefined) ?? null;
    this.onRequestFn = (e[Export.onRequest] as Fn | undefined) ?? null;
    this.onResponseFn = (e[Export.onResponse] as Fn | undefined) ?? null;
    this.onRequestDoneFn = (e[Export.onRequestDone] as Fn | undefined) ?? null;
  }

  /** The phases the plugin set while configuring (default: both). */
  get phases(): PhaseMask {
    return this.host.phases;
  }

  /** Hands the config JSON to on_configure; throws PluginConfigRefusedError when refused. */
  configure(): void {
    const fn = this.onConfigureFn;
    if (fn === null) return;
    const cfg = this.plugin.configBytes;
    let ptr = 0;
    if (cfg.length > 0) {
      if (this.alloc === null) throw new PluginConfigRefusedError(this.services.step, `module exports no ${Export.alloc}`);
      try {
        ptr = this.at(this.alloc(cfg.length), cfg.length, Export.alloc);
      } catch (err) {
        throw new PluginConfigRefusedError(this.services.step, `${Export.alloc}(${cfg.length}) failed: ${errorText(err)}`, err);
      }
      this.view().set(cfg, ptr);
    }
    const host = this.host;
    host.beginConfigure();
    let rc: number;
    try {
      rc = fn(ptr, cfg.length);
    } catch (err) {
      throw new PluginConfigRefusedError(this.services.step, `${Export.onConfigure} failed: ${errorText(err)}`, err);
    } finally {
      host.endConfigure();
    }
    if (rc !== 0) throw new PluginConfigRefusedError(this.services.step, host.refusalReason(`on_configure returned ${rc}`));
    if (host.contextsWanted > 0 && host.phases === PhaseMask.Both && this.onRequestFn !== null && this.onResponseFn !== null) {
      const done = this.onRequestDoneFn;
      if (done === null) throw new PluginConfigRefusedError(this.services.step, `asks for request contexts but exports no ${Export.onRequestDone}`);
      this.contexts = new RequestContexts(host.contextsWanted, (context) => { done(context); });
    }
  }

  /** Open request contexts (0 without them). */
  get openContexts(): number {
    return this.contexts === null ? 0 : this.contexts.size;
  }

  /** Request-phase callback. Returns the plugin's Action; throws on a trap. */
  callRequest(ex: HostExchange): number {
    const fn = this.onRequestFn;
    if (fn === null) return 0;
    const c = this.contexts;
    return this.invoke(fn, ex, requestCallSize(ex), requestCallFlags(ex), c === null ? -1 : c.open(ex));
  }

  /** Response-phase callback over newReply ?? replyBody ?? localReply. */
  callResponse(ex: HostExchange): number {
    const fn = this.onResponseFn;
    if (fn === null) return 0;
    const c = this.contexts;
    if (c === null) return this.invoke(fn, ex, responseCallSize(ex), responseCallFlags(ex), -1);
    // The context ends with the callback (after a trap the instance and its contexts are gone).
    const context = c.take(ex);
    const rc = this.invoke(fn, ex, responseCallSize(ex), responseCallFlags(ex), context);
    if (context >= 0) c.release(context);
    return rc;
  }

  /** Calls a phase callback with `ex` current (the host functions act on it) for its duration. */
  private invoke(fn: Fn, ex: HostExchange, size: number, flags: number, context: number): number {
    const host = this.host;
    flags |= host.sameFlags(ex) | host.subopFlag();
    host.begin(ex);
    try {
      return fn(size, flags, context);
    } finally {
      host.end();
    }
  }

  /** Current memory view (memory.grow detaches the old buffer). */
  private view(): Uint8Array {
    // memory.grow detaches the old ArrayBuffer, and a view of a detached buffer has length 0:
    // checking that is cheaper than the Memory#buffer getter on every access.
    if (this.u8.length === 0) {
      if (this.memory === null) {
        throw new PluginTrap(`plugin ${this.services.step} called a host function that reads or writes its memory from its start function; ` +
          `call it from ${Export.onConfigure} or a phase callback`);
      }
      const buf = this.memory.buffer;
      this.u8 = new Uint8Array(buf);
      this.buf = Buffer.from(buf);
    }
    return this.u8;
  }

  /**
   * `ptr` read as the u32 it is to the plugin (an i32 argument arrives signed), after checking that
   * [ptr, ptr + len) lies inside the plugin's memory (len read as a u32 too: a negative length is
   * past any memory, and the sum does not wrap at 2^32 as it would in the plugin). A span outside
   * traps the call, as an access outside its memory would in the plugin itself: the host never
   * reads a shorter span (or another one, from the end, as slice() would for a negative start)
   * than the plugin named.
   */
  private at(ptr: number, len: number, fn: string): number {
    const p = ptr >>> 0;
    const size = this.view().length;
    if (p + (len >>> 0) > size) {
      throw new PluginTrap(`plugin ${this.services.step} passed ${fn} the span [${p}, ${p} + ${len >>> 0}) outside its memory (${size} bytes)`);
    }
    return p;
  }

  private str(ptr: number, len: number, fn: string): string {
    if (len === 0) return '';
    ptr = this.at(ptr, len, fn);
    const u8 = this.u8;
    // Measured (Node 20): up to ~8 characters a loop is fastest (17 ns for 4), beyond that
    // Buffer's UTF-16 slice (≈60 ns for 40 characters, a flat string that hashes fast as a Map
    // key; the loop builds a rope that costs ~5× as much to look up).
    if (len > 16) return this.buf.toString('utf16le', ptr, ptr + len);
    let s = '';
    for (let i = ptr, end = ptr + len - 1; i < end; i += 2) s += String.fromCharCode(u8[i]! | (u8[i + 1]! << 8));
    return s;
  }

  /** A sub-operation's name: the string decoded before when the bytes at that address are the
   *  same (plugins name sub-operations with constants: one string object per name, no decoding,
   *  and its hash already computed for the profiler's map). */
  private subopName(ptr: number, len: number): string {
    const hit = this.cachedAt(this.subopNames, ptr, len);
    if (hit !== null) return hit.name;
    const name = this.str(ptr, len, 'proxy_subop_begin');
    if (this.subopNames.length < SUBOP_NAMES_CACHED) this.subopNames.push({ ptr, bytes: this.bytes(ptr, len, 'proxy_subop_begin'), name });
    return name;
  }

  /** The bytes at [ptr, ptr+len) as a needle to search for: the copy made before when the bytes at
   *  that address are the same (plugins search for constants: no view or copy per call). */
  private needle(ptr: number, len: number): Uint8Array {
    const hit = this.cachedAt(this.needles, ptr, len);
    if (hit !== null) return hit.bytes;
    const bytes = this.bytes(ptr, len, 'proxy_body_find');
    if (this.needles.length < NEEDLES_CACHED) this.needles.push({ ptr, bytes });
    return bytes;
  }

  /** The entry of `cache` copied from address `ptr` whose bytes are still the ones there, or null. */
  private cachedAt<T extends { ptr: number; bytes: Uint8Array }>(cache: readonly T[], ptr: number, len: number): T | null {
    const u8 = this.view();
    outer: for (let k = 0; k < cache.length; k++) {
      const c = cache[k]!;
      if (c.ptr !== ptr || c.bytes.length !== len) continue;
      const b = c.bytes;
      for (let i = 0; i < len; i++) if (b[i] !== u8[ptr + i]) continue outer;
      return c;
    }
    return null;
  }

  /** A copy of plugin memory: kept beyond the call (a replaced body, a local reply). */
  private bytes(ptr: number, len: number, fn: string): Uint8Array {
    ptr = this.at(ptr, len, fn);
    return this.u8.slice(ptr, ptr + len);
  }

  /** A view of plugin memory, valid during the call only. */
  private viewOf(ptr: number, len: number, fn: string): Uint8Array {
    ptr = this.at(ptr, len, fn);
    return this.u8.subarray(ptr, ptr + len);
  }

  /** Writes `s` as UTF-16LE at ptr if it fits in max bytes; returns its byte length. */
  private writeStr(s: string, ptr: number, max: number): number {
    const n = s.length * 2;
    if (n > max) return n;
    ptr = this.at(ptr, n, 'proxy_get_property');
    const u8 = this.u8;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      u8[ptr + 2 * i] = c & 0xff;
      u8[ptr + 2 * i + 1] = c >>> 8;
    }
    return n;
  }

  /** Copies `v` to dst when it fits in max; returns its length, -1 for none. */
  private writeBytes(v: Uint8Array | null | undefined, dst: number, max: number): number {
    if (v == null) return -1;
    if (v.length <= max) {
      dst = this.at(dst, v.length, 'proxy_get_body'); // (first: it refreshes u8 after a memory.grow)
      this.u8.set(v, dst);
    }
    return v.length;
  }

  /** The core-ABI marshalling of each host function (names and signatures: abi-spec.ts). */
  private imports(): Record<string, (...args: never[]) => unknown> {
    const host = this.host;
    const services = this.services;
    return {
      proxy_get_body: (phase: number, dst: number, max: number): number => this.writeBytes(host.body(phase), dst, max),
      // A plugin can rule a body out (a field name it would edit is not there) without copying it.
      proxy_body_find: (phase: number, ptr: number, len: number): number => host.bodyFind(phase, this.needle(ptr, len)),
      proxy_set_body: (phase: number, ptr: number, len: number): number => {
        host.setBody(phase, this.bytes(ptr, len, 'proxy_set_body'));
        return 0;
      },
      proxy_reject: (code: number, namePtr: number, nameLen: number, msgPtr: number, msgLen: number): void =>
        host.reject(code, this.str(namePtr, nameLen, 'proxy_reject'), this.str(msgPtr, msgLen, 'proxy_reject')),
      proxy_reply_local: (ptr: number, len: number): void => host.replyLocal(this.bytes(ptr, len, 'proxy_reply_local')),
      proxy_set_route: (ptr: number, len: number): void => host.setRoute(this.str(ptr, len, 'proxy_set_route')),
      proxy_set_user: (ptr: number, len: number): void => host.setUser(this.str(ptr, len, 'proxy_set_user')),
      // (a message is decoded up to the longest line the host writes: a plugin may name all its memory)
      proxy_log: (level: number, ptr: number, len: number): void => {
        ptr = this.at(ptr, len, 'proxy_log');
        const shown = Math.min(len >>> 0, MAX_PLUGIN_LOG_CHARS * 2) & ~1;
        host.log(level, this.str(ptr, shown, 'proxy_log'), ((len >>> 0) - shown) >>> 1);
      },
      proxy_log_fields: (level: number, ptr: number, len: number): void => host.logRecord(level, this.viewOf(ptr, len, 'proxy_log_fields')),
      proxy_set_phases: (mask: number): void => host.setPhases(mask),
      proxy_request_contexts: (max: number): number => host.requestContexts(max),
      proxy_get_property: (id: number, dst: number, max: number): number => {
        const v = host.property(id);
        return v === null ? -1 : this.writeStr(v, dst, max);
      },
      proxy_get_number: (id: number): number => host.number(id),
      proxy_define_metric: (kind: number, namePtr: number, nameLen: number, labelsPtr: number, labelsLen: number): number => {
        const labels = this.str(labelsPtr, labelsLen, 'proxy_define_metric');
        return host.defineMetric(kind as MetricKind, this.str(namePtr, nameLen, 'proxy_define_metric'), labels === '' ? [] : labels.split(','));
      },
      // The values' UTF-16 (with their length units) is the key as it is: no parsing per call.
      proxy_metric_series: (id: number, valuesPtr: number, valuesLen: number): number =>
        host.metricSeries(id, this.str(valuesPtr, valuesLen, 'proxy_metric_series')),
      proxy_increment_metric: (id: number, delta: number): void => host.increment(id, delta),
      proxy_record_metric: (id: number, value: number): void => host.record(id, value),
      proxy_subop_begin: host.timesSubops ? (namePtr: number, nameLen: number): void => host.subopBegin(host.subopRecorded() ? this.subopName(namePtr,
        nameLen) : null) : noop2,
      proxy_subop_end: host.timesSubops ? (): void => host.subopEnd() : noop,
      // Keys are read where they lie in plugin memory (KvStore.getAt…), never decoded.
      // Values are copied between the store and plugin memory directly, without a view of either.
      // A key, a value or a destination outside the plugin's memory traps (never a shorter key or value).
      proxy_kv_get: (keyPtr: number, keyLen: number, dst: number, max: number): number => {
        const key = this.at(keyPtr, keyLen, 'proxy_kv_get');
        try {
          return host.kvGetInto(this.u8, key, keyLen, dst >>> 0, max);
        } catch (err) {
          // The store refuses a destination past the memory's end (before copying anything).
          if (!(err instanceof RangeError)) throw err;
          throw new PluginTrap(`plugin ${services.step} passed proxy_kv_get the destination ${dst >>> 0} (at most ${max} bytes) outside its memory ` +
            `(${this.u8.length} bytes)`);
        }
      },
      proxy_kv_set: (keyPtr: number, keyLen: number, valPtr: number, valLen: number, ttlMs: number): number => {
        const key = this.at(keyPtr, keyLen, 'proxy_kv_set');
        return host.kvSetFrom(this.u8, key, keyLen, this.at(valPtr, valLen, 'proxy_kv_set'), valLen, ttlMs) ? 0 : -1;
      },
      proxy_kv_delete: (keyPtr: number, keyLen: number): number => {
        const key = this.at(keyPtr, keyLen, 'proxy_kv_delete');
        return host.kvDeleteAt(this.u8, key, keyLen) ? 0 : -1;
      },
      // An f64, not an i64: a BigInt result would cost an allocation per call.
      proxy_now: (): number => host.nowNs(),
      proxy_abort: (msgPtr: number, filePtr: number, line: number, col: number): void => {
        throw new PluginTrap(`abort: ${this.asString(msgPtr)} at ${this.asString(filePtr)}:${line}:${col}`);
      },
      proxy_fuel_exhausted: (): void => {
        throw new FuelExhaustedError(services.step, services.fuel);
      },
    };
  }

  /** An AssemblyScript string object (byte length in the header word before ptr). */
  private asString(ptr: number): string {
    if (ptr === 0) return '';
    const u8 = this.view();
    ptr >>>= 0;
    if (ptr < 4 || ptr > u8.length) return '?';
    const len = new DataView(u8.buffer).getUint32(ptr - 4, true);
    if (ptr + len > u8.length) return '?';
    return this.str(ptr, len, 'proxy_abort');
  }
}

const EMPTY = new Uint8Array(0);

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// With recording off the sub-operation calls do nothing (same arity as the ABI's functions).
function noop(): void {}
function noop2(_a: number, _b: number): void {}
