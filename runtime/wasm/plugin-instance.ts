// One live WebAssembly instance of a plugin and the host functions it imports.
// Hot-path rules (notes/wasm-host.md): copy into plugin memory with Uint8Array.set, never slice out
// of it except to keep a result (replaced body, local reply); no clock reads here unless a sub-op
// sink is installed; imports are closures created once per instance, not per call.
import { IMPORT_MODULE, Export, Property, CallFlag, PhaseBit, LOG_LEVEL_NAMES, type MetricKind } from './abi.ts';
import { PluginTrap, FuelExhaustedError, PluginConfigRefusedError, ConfigureNotes } from './errors.ts';
import {
  type HostExchange, VERDICT_REJECT, VERDICT_LOCAL_REPLY, findInBody, requestCallSize, requestCallFlags, responseCallSize, responseCallFlags,
} from './host-exchange.ts';
import type { KvStore } from './kv-store.ts';
import type { PluginMetricRegistry } from './plugin-metrics.ts';
import { StepHostState } from './step-host-state.ts';
import type { Logger } from './logger.ts';
import type { CompiledPlugin } from './compile.ts';

/** Receives sub-operation timings (name, phase, duration ns). Null = recording off. */
export type SubopSink = (name: string, phase: 0 | 1, durationNs: number) => void;

/** Per-step services shared by successive instances of the same step. */
/** What the host gives one step of one graph, bound when the graph is built. */
export interface PluginServices {
  readonly step: string; // "wasm:<name>"
  readonly pipelineId: string;
  /** The graph's variant: "baseline" or "candidate" (the `pipeline` label of its metrics). */
  readonly variant: string;
  readonly logger: Logger;
  /** This step's kv store in this graph (WasmHost.kv). */
  readonly kv: KvStore;
  /** Where its plugin metrics are defined (WasmHost.pluginMetrics). */
  readonly metrics: PluginMetricRegistry;
  /** proxy_step_instance_rebuilds_total for this step and graph. */
  readonly rebuilds: { inc(): void };
  readonly subop: SubopSink | null;
  readonly fuel: number;
}

type Fn = (...args: number[]) => number;

export class PluginInstance {
  readonly plugin: CompiledPlugin;
  readonly services: PluginServices;
  /** The host functions this instance imports (module `proxy`): exactly abi-spec.ts's HOST_FUNCTIONS. */
  readonly hostImports: Record<string, (...args: never[]) => unknown>;
  private readonly instance: WebAssembly.Instance;
  private readonly memory: WebAssembly.Memory;
  private u8: Uint8Array;
  /** The same memory as a Buffer (for its fast UTF-16 decoding); refreshed with u8. */
  private buf: Buffer;
  private readonly alloc: Fn | null;
  private readonly onConfigureFn: Fn | null;
  private readonly onRequestFn: Fn | null;
  private readonly onResponseFn: Fn | null;
  private ex: HostExchange | null;
  private readonly state: StepHostState;
  /** The op / db / collection / appName this instance last read (CallFlag.SameOp etc. compare with them). */
  private lastOp: string;
  private lastDb: string;
  private lastColl: string;
  private lastApp: string;
  /** PhaseBit mask from proxy_set_phases during configure (default: both). */
  phases: number;
  private configuring: boolean;
  /** Warnings and errors the plugin logged during on_configure: the reason of a refusal. */
  private readonly configNotes: ConfigureNotes;
  /** The last kv key decoded, and its UTF-16 bytes: most calls repeat a key (a bucket, a version). */
  private keyText: string;
  private keyBytes: Uint8Array;
  private keyLen: number;

  /** Instantiates (runs the module's start function); throws on a trap. */
  constructor(plugin: CompiledPlugin, services: PluginServices) {
    this.plugin = plugin;
    this.services = services;
    this.ex = null;
    this.state = new StepHostState(services);
    this.lastOp = '';
    this.lastDb = '';
    this.lastColl = '';
    this.lastApp = '';
    this.phases = PhaseBit.Both;
    this.configuring = false;
    this.configNotes = new ConfigureNotes();
    this.keyText = '';
    this.keyBytes = new Uint8Array(64);
    this.keyLen = -1;
    this.hostImports = this.imports();
    this.instance = new WebAssembly.Instance(plugin.module, { [IMPORT_MODULE]: this.hostImports });
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
  }

  /** Hands the config JSON to on_configure; throws PluginConfigRefusedError when refused. */
  configure(): void {
    const fn = this.onConfigureFn;
    if (fn === null) return;
    const cfg = this.plugin.configBytes;
    let ptr = 0;
    if (cfg.length > 0) {
      if (this.alloc === null) throw new PluginConfigRefusedError(this.services.step, `module exports no ${Export.alloc}`);
      ptr = this.alloc(cfg.length);
      this.view().set(cfg, ptr);
    }
    this.configuring = true;
    let rc: number;
    try {
      rc = fn(ptr, cfg.length);
    } finally {
      this.configuring = false;
    }
    if (rc !== 0) throw new PluginConfigRefusedError(this.services.step, this.configNotes.reason(`on_configure returned ${rc}`));
  }

  /** Request-phase callback. Returns the plugin's Action; throws on a trap. */
  callRequest(ex: HostExchange): number {
    const fn = this.onRequestFn;
    if (fn === null) return 0;
    return this.invoke(fn, ex, requestCallSize(ex), requestCallFlags(ex));
  }

  /** Response-phase callback over newReply ?? replyBody ?? localReply. */
  callResponse(ex: HostExchange): number {
    const fn = this.onResponseFn;
    if (fn === null) return 0;
    return this.invoke(fn, ex, responseCallSize(ex), responseCallFlags(ex));
  }

  /** Calls a phase callback with `ex` current (the host functions act on it) for its duration. */
  private invoke(fn: Fn, ex: HostExchange, size: number, flags: number): number {
    flags |= this.sameFlags(ex);
    this.ex = ex;
    try {
      return fn(size, flags);
    } finally {
      this.ex = null;
    }
  }

  private sameFlags(ex: HostExchange): number {
    return (ex.op === this.lastOp ? CallFlag.SameOp : 0) | (ex.db === this.lastDb ? CallFlag.SameDb : 0) |
      (ex.collection === this.lastColl ? CallFlag.SameCollection : 0) | (ex.conn.appName === this.lastApp ? CallFlag.SameAppName : 0);
  }

  /** Current memory view (memory.grow detaches the old buffer). */
  private view(): Uint8Array {
    // memory.grow detaches the old ArrayBuffer, and a view of a detached buffer has length 0:
    // checking that is cheaper than the Memory#buffer getter on every access.
    if (this.u8.length === 0) {
      const buf = this.memory.buffer;
      this.u8 = new Uint8Array(buf);
      this.buf = Buffer.from(buf);
    }
    return this.u8;
  }

  private str(ptr: number, len: number): string {
    if (len <= 0) return '';
    const u8 = this.view();
    // Measured (Node 20): up to ~8 characters a loop is fastest (17 ns for 4), beyond that
    // Buffer's UTF-16 slice (≈60 ns for 40 characters, a flat string that hashes fast as a Map
    // key; the loop builds a rope that costs ~5× as much to look up).
    if (len > 16) return this.buf.toString('utf16le', ptr, ptr + len);
    let s = '';
    for (let i = ptr, end = ptr + len - 1; i < end; i += 2) s += String.fromCharCode(u8[i]! | (u8[i + 1]! << 8));
    return s;
  }

  /** A kv key: the previous key's string when the bytes are the same. */
  private key(ptr: number, len: number): string {
    const u8 = this.view();
    if (len === this.keyLen) {
      const kb = this.keyBytes;
      let i = 0;
      while (i < len && kb[i] === u8[ptr + i]) i++;
      if (i === len) return this.keyText;
    }
    const s = this.str(ptr, len);
    if (len <= this.keyBytes.length) {
      this.keyBytes.set(u8.subarray(ptr, ptr + len));
      this.keyLen = len;
      this.keyText = s;
    }
    return s;
  }

  private bytes(ptr: number, len: number): Uint8Array {
    return this.view().slice(ptr, ptr + len); // kept beyond the call: must be a copy
  }

  private current(): HostExchange {
    const ex = this.ex;
    if (ex === null) throw new PluginTrap(`plugin ${this.services.step} called a request function outside a request`);
    return ex;
  }

  /** Writes `s` as UTF-16LE at ptr if it fits in max bytes; returns its byte length. */
  private writeStr(s: string, ptr: number, max: number): number {
    const n = s.length * 2;
    if (n > max) return n;
    const u8 = this.view();
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      u8[ptr + 2 * i] = c & 0xff;
      u8[ptr + 2 * i + 1] = c >>> 8;
    }
    return n;
  }

  private property(id: number): string | null {
    // The clock needs no exchange, so plugins may read it in onConfigure too.
    if (id === Property.WallClockMs) return String(Date.now());
    const ex = this.current();
    switch (id) {
      case Property.Op: return (this.lastOp = ex.op);
      case Property.Db: return (this.lastDb = ex.db);
      case Property.Collection: return (this.lastColl = ex.collection);
      case Property.AppName: return (this.lastApp = ex.conn.appName);
      case Property.ClientAddress: return ex.conn.clientAddress;
      case Property.User: return ex.conn.user;
      case Property.PipelineId: return ex.pipelineId;
      case Property.Phase: return ex.phase === 0 ? 'request' : 'response';
      case Property.RequestId: return String(ex.requestId);
      case Property.ConnectionId: return String(ex.conn.id);
      case Property.Route: return ex.route ?? '';
      default: return null;
    }
  }

  /** proxy_get_number: numeric properties without a decimal round trip; NaN for an unknown id. */
  private number(id: number): number {
    if (id === Property.WallClockMs) return Date.now();
    const ex = this.current();
    switch (id) {
      case Property.RequestId: return ex.requestId;
      case Property.ConnectionId: return ex.conn.id;
      case Property.Phase: return ex.phase;
      case Property.ElapsedNs: return Math.round((performance.now() - ex.startedAt) * 1e6);
      case Property.ReplyOk: return ex.phase === 1 ? ex.replyOk() : -1;
      case Property.ReplyCode: return ex.phase === 1 ? ex.replyCode() : 0;
      default: return NaN;
    }
  }

  private imports(): Record<string, (...args: never[]) => unknown> {
    const services = this.services;
    const step = services.step;
    const state = this.state;
    return {
      proxy_get_body: (phase: number, dst: number, max: number): number => {
        const ex = this.current();
        const body = phase === 0 ? ex.requestDocument() : (ex.newReply ?? ex.replyBody ?? ex.localReply);
        if (body === null) return -1;
        if (body.length <= max) this.view().set(body, dst);
        return body.length;
      },
      // Offset of the first occurrence of the bytes [ptr, ptr+len) in the body, -1 when absent:
      // a plugin can rule a body out (a field name it would edit is not there) without copying it.
      proxy_body_find: (phase: number, ptr: number, len: number): number => {
        this.view();
        return findInBody(this.current(), phase, this.buf.subarray(ptr, ptr + len));
      },
      proxy_set_body: (phase: number, ptr: number, len: number): number => {
        const ex = this.current();
        if (phase === 0) ex.newRequest = this.bytes(ptr, len);
        else ex.newReply = this.bytes(ptr, len);
        return 0;
      },
      proxy_reject: (code: number, namePtr: number, nameLen: number, msgPtr: number, msgLen: number): void => {
        const ex = this.current();
        ex.verdict = VERDICT_REJECT;
        ex.rejectCode = code;
        ex.rejectCodeName = this.str(namePtr, nameLen);
        ex.rejectMessage = this.str(msgPtr, msgLen);
      },
      proxy_reply_local: (ptr: number, len: number): void => {
        const ex = this.current();
        if (ex.phase === 0) {
          ex.verdict = VERDICT_LOCAL_REPLY;
          ex.localReply = this.bytes(ptr, len);
        } else {
          ex.newReply = this.bytes(ptr, len);
        }
      },
      proxy_set_route: (ptr: number, len: number): void => {
        this.current().route = this.str(ptr, len);
      },
      // The identity an auth step established; later steps (and later requests on this
      // connection) read it as the `user` property.
      proxy_set_user: (ptr: number, len: number): void => {
        this.current().conn.user = this.str(ptr, len);
      },
      proxy_log: (level: number, ptr: number, len: number): void => {
        const name = LOG_LEVEL_NAMES[level] ?? 'info';
        const ex = this.ex;
        const msg = this.str(ptr, len);
        if (this.configuring) this.configNotes.add(name, msg);
        services.logger[name]({ step, pipeline: services.pipelineId, op: ex === null ? undefined : ex.op }, msg);
      },
      // Only while configuring: the phases the step acts in (the pipeline skips the others).
      proxy_set_phases: (mask: number): void => {
        if (this.configuring) this.phases = mask & PhaseBit.Both;
      },
      proxy_log_fields: (level: number, ptr: number, len: number): void => state.logRecord(level, this.view().subarray(ptr, ptr + len)),
      proxy_get_number: (id: number): number => this.number(id),
      proxy_get_property: (id: number, dst: number, max: number): number => {
        const v = this.property(id);
        if (v === null) return -1;
        return this.writeStr(v, dst, max);
      },
      proxy_define_metric: (kind: number, namePtr: number, nameLen: number): number =>
        state.defineMetric(kind as MetricKind, this.str(namePtr, nameLen)),
      proxy_increment_metric: (id: number, delta: number): void => state.increment(id, delta),
      proxy_record_metric: (id: number, value: number): void => state.record(id, value),
      proxy_subop_begin: state.timesSubops ? (namePtr: number, nameLen: number): void => state.subopBegin(this.str(namePtr, nameLen)) : noop2,
      proxy_subop_end: state.timesSubops ? (): void => state.subopEnd(this.ex === null ? 0 : this.ex.phase) : noop,
      proxy_kv_get: (keyPtr: number, keyLen: number, dst: number, max: number): number => {
        const v = services.kv.get(this.key(keyPtr, keyLen));
        if (v === undefined) return -1;
        if (v.length <= max) this.view().set(v, dst);
        return v.length;
      },
      proxy_kv_set: (keyPtr: number, keyLen: number, valPtr: number, valLen: number, ttlMs: number): number => {
        const ok = services.kv.set(this.key(keyPtr, keyLen), this.view().subarray(valPtr, valPtr + valLen), ttlMs);
        return ok ? 0 : -1;
      },
      proxy_kv_delete: (keyPtr: number, keyLen: number): number => {
        return services.kv.delete(this.key(keyPtr, keyLen)) ? 0 : -1;
      },
      // f64 ns (exact to 2^53 ns ≈ 104 days of uptime, sub-µs resolution): a BigInt i64 result
      // costs an allocation per call.
      proxy_now: (): number => performance.now() * 1e6,
      proxy_abort: (msgPtr: number, filePtr: number, line: number, col: number): void => {
        throw new PluginTrap(`abort: ${this.asString(msgPtr)} at ${this.asString(filePtr)}:${line}:${col}`);
      },
      proxy_fuel_exhausted: (): void => {
        throw new FuelExhaustedError(step, services.fuel);
      },
    };
  }

  /** An AssemblyScript string object (byte length in the header word before ptr). */
  private asString(ptr: number): string {
    if (ptr === 0) return '';
    const u8 = this.view();
    if (ptr < 4 || ptr > u8.length) return '?';
    const len = new DataView(u8.buffer).getUint32(ptr - 4, true);
    if (ptr + len > u8.length) return '?';
    return this.str(ptr, len);
  }
}

// With recording off the sub-operation calls do nothing (same arity as the ABI's functions).
function noop(): void {}
function noop2(_a: number, _b: number): void {}

