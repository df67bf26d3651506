// The host functions, implemented once for every kind of plugin instance. A core module
// (plugin-instance.ts) and a component (component-instance.ts) differ only in how values cross
// the boundary — pointers into linear memory and UTF-16 there, jco-lifted strings, byte arrays
// and enum names here — so each is a thin adapter that decodes its arguments and calls StepHost,
// which acts on the HostExchange of the call in progress and on the step's services (logger, kv,
// metrics, sub-operation sink).
//
// Hot path: no allocation here beyond what a function returns to keep (a replaced body, a string
// property); the exchange is a field set around each call, not a closure.
import { performance } from 'node:perf_hooks';
import { stepNow, NS_PER_TICK } from '../step-clock.ts';
import { Property, Phase, PhaseMask, phaseName, CallFlag, LOG_LEVEL_NAMES, MAX_REQUEST_CONTEXTS, type MetricKind } from './abi.ts';
import { PluginTrap, ConfigureNotes } from './errors.ts';
import { type HostExchange, VERDICT_REJECT, VERDICT_LOCAL_REPLY, findInBody } from './host-exchange.ts';
import { checkDocument, validateDocument } from '../wire/index.ts';
import { encodeLabelKey, type BoundMetric, type MetricBinding } from './plugin-metrics.ts';
import type { PluginServices, SubopGate } from './plugin-instance.ts';

/**
 * The largest document a step may set as the command or the reply: mongod's largest command
 * (maxBsonObjectSize, 16 MiB, plus 16 KiB of command overhead, BSONObjectMaxInternalSize).
 */
export const MAX_STEP_DOCUMENT_BYTES = 16 * 1024 * 1024 + 16 * 1024;

/**
 * The longest log line a plugin writes: a message's characters, a record's bytes. Beyond it a
 * message is cut (saying how much) and a record replaced by a note: every line is written to the
 * log stream and kept in the proxy's log ring (log.ring_lines of them), so a plugin logging its
 * whole memory per request would otherwise hold ring_lines × its memory cap.
 */
export const MAX_PLUGIN_LOG_CHARS = 16 * 1024;
/** Distinct metric definitions (kind, name, label names) one plugin instance may make, refused ones included. */
export const MAX_DEFINITIONS_PER_INSTANCE = 1024;

/** Sub-operations nested deeper than this are not timed (their begin/end still pair up). */
const MAX_SUBOP_DEPTH = 16;

export class StepHost {
  readonly services: PluginServices;
  /** The exchange of the callback in progress; null between calls (and while configuring). */
  ex: HostExchange | null;
  /** The phases from set_phases during configure (default: both). */
  phases: PhaseMask;
  /** Request contexts the plugin asked for while configuring (0: none). */
  contextsWanted: number;
  /** True during on_configure: set_phases is accepted, warnings and errors are kept as the refusal's reason. */
  private configuring: boolean;
  private readonly configNotes: ConfigureNotes;
  /** The op / db / collection / appName this instance last read (CallFlag.SameOp etc. compare with them). */
  private lastOp: string;
  private lastDb: string;
  private lastColl: string;
  private lastApp: string;
  /** Metric series by the id the plugin was given (a metric's own id, or one of its label sets'). */
  private readonly metrics: BoundMetric[];
  /** For a metric's own id: its label sets; null for a label set's id. */
  private readonly defined: (DefinedMetric | null)[];
  /** A metric's own id by its definition (kind, name, label names). */
  private readonly definedIds = new Map<string, number>();
  /** Has the instance made MAX_DEFINITIONS_PER_INSTANCE definitions (said once)? */
  private definitionsFull = false;
  /** Open sub-operations, a stack of depth `subopDepth` (begin/end nest; deeper than the arrays: not timed). */
  private readonly subopNames: string[];
  private readonly subopStarts: Float64Array;
  private subopDepth: number;
  /** `"step":…,"pipeline":…,"graph":…,` — the members the host puts before a plugin's log record. */
  private readonly recordPrefix: string;
  /** Whether sub-operations are recorded at all (with the recorder off, begin/end are no-ops). */
  readonly timesSubops: boolean;
  /** PluginServices.subopGate and subopDirect. */
  private readonly subopGate: SubopGate | null;
  private readonly subopDirect: boolean;
  /**
   * The clock (performance.now(), ms) as first read during the callback in progress, -1 before:
   * the kv store's TTLs and expiry checks take it rather than a reading of their own, so a
   * callback that reads the clock (proxy_now, elapsed_ns) and then gets and sets a key with a TTL
   * reads it once, not three times. TTLs are whole milliseconds; the reading is at most the
   * callback's own run time old. proxy_now itself always reads the clock.
   */
  private callNow: number;

  constructor(services: PluginServices) {
    this.services = services;
    this.ex = null;
    this.phases = PhaseMask.Both;
    this.contextsWanted = 0;
    this.configuring = false;
    this.configNotes = new ConfigureNotes();
    this.lastOp = '';
    this.lastDb = '';
    this.lastColl = '';
    this.lastApp = '';
    this.metrics = [];
    this.defined = [];
    this.subopNames = [];
    this.subopStarts = new Float64Array(MAX_SUBOP_DEPTH);
    this.subopDepth = 0;
    this.recordPrefix = `"step":${JSON.stringify(services.step)},"pipeline":${JSON.stringify(services.pipelineId)},`
      + `"graph":${JSON.stringify(services.variant)},`;
    this.timesSubops = services.subop !== null;
    this.subopGate = services.subopGate ?? null;
    this.subopDirect = services.subopDirect ?? true;
    this.callNow = -1;
  }

  // ---- call lifecycle -----------------------------------------------------------------------

  /** A phase callback over `ex` starts: the host functions act on it until end(). */
  begin(ex: HostExchange): void {
    this.ex = ex;
    this.callNow = -1;
  }

  end(): void {
    this.ex = null;
    this.callNow = -1;
  }

  /** Runs `configure` with configuring on; a refusal (a false result) carries what the plugin logged. */
  beginConfigure(): void {
    this.configuring = true;
    this.callNow = -1;
  }

  endConfigure(): void {
    this.configuring = false;
    this.callNow = -1;
  }

  /** The reason of a refusal: the warnings and errors logged while configuring, else `fallback`. */
  refusalReason(fallback: string): string {
    return this.configNotes.reason(fallback);
  }

  /** CallFlag.Same* bits: which of op / db / collection / appName equal what this instance last read. */
  sameFlags(ex: HostExchange): number {
    return (ex.op === this.lastOp ? CallFlag.SameOp : 0) | (ex.db === this.lastDb ? CallFlag.SameDb : 0) |
      (ex.collection === this.lastColl ? CallFlag.SameCollection : 0) | (ex.conn.appName === this.lastApp ? CallFlag.SameAppName : 0);
  }

  current(): HostExchange {
    const ex = this.ex;
    if (ex === null) throw new PluginTrap(`plugin ${this.services.step} called a request function outside a request`);
    return ex;
  }

  // ---- body and verdicts --------------------------------------------------------------------

  /** The command (phase 0, sequences folded in) or the current reply (phase 1); null when none. */
  body(phase: number): Uint8Array | null {
    const ex = this.current();
    return phase === Phase.Request ? ex.requestDocument() : (ex.newReply ?? ex.replyBody ?? ex.localReply);
  }

  bodyFind(phase: number, needle: Uint8Array): number {
    return findInBody(this.current(), phase, needle);
  }

  /**
   * Traps unless `bson` is one BSON document of at most MAX_STEP_DOCUMENT_BYTES. A command (`whole`)
   * goes to a shared upstream connection only as the proxy would forward a client's own: validated
   * whole (runtime/wire/bson-validate.ts). A reply goes to this request's client alone and is
   * checked as the proxy checks the upstream's replies, by its length and terminator: a cache hit
   * answers with a stored reply, and a whole walk costs ~1.9 ns a byte (25 µs for a 13 KB reply).
   */
  private checkDocument(fn: string, bson: Uint8Array, whole: boolean): void {
    const step = this.services.step;
    if (bson.length > MAX_STEP_DOCUMENT_BYTES) {
      throw new PluginTrap(`plugin ${step} ${fn}: a document of ${bson.length} bytes, larger than the ${MAX_STEP_DOCUMENT_BYTES} a command or reply may be`);
    }
    let end: number;
    try {
      end = whole ? validateDocument(bson, 0, bson.length) : checkDocument(bson, 0, bson.length);
    } catch (err) {
      throw new PluginTrap(`plugin ${step} ${fn}: not a valid BSON document (${(err as Error).message})`);
    }
    if (end !== bson.length) throw new PluginTrap(`plugin ${step} ${fn}: ${bson.length - end} bytes after the BSON document`);
  }

  /** `bson` must be the host's own (a copy out of plugin memory): it outlives the call. */
  setBody(phase: number, bson: Uint8Array): void {
    const ex = this.current();
    this.checkDocument('proxy_set_body', bson, phase === Phase.Request);
    if (phase === Phase.Request) ex.newRequest = bson;
    else ex.newReply = bson;
  }

  reject(code: number, codeName: string, message: string): void {
    const ex = this.current();
    ex.verdict = VERDICT_REJECT;
    ex.rejectCode = code;
    ex.rejectCodeName = codeName;
    ex.rejectMessage = message;
  }

  /** Request phase: answer without the upstream; response phase: replace the reply. */
  replyLocal(bson: Uint8Array): void {
    const ex = this.current();
    this.checkDocument('proxy_reply_local', bson, false);
    if (ex.phase === Phase.Request) {
      ex.verdict = VERDICT_LOCAL_REPLY;
      ex.localReply = bson;
    } else {
      ex.newReply = bson;
    }
  }

  setRoute(uri: string): void {
    this.current().route = uri;
  }

  /** The identity an auth step established; later steps (and later requests on this connection)
   *  read it as the `user` property. */
  setUser(name: string): void {
    this.current().conn.user = name;
  }

  /** Only while configuring: the phases the step acts in (the pipeline skips the others). */
  setPhases(mask: number): void {
    if (this.configuring) this.phases = (mask & PhaseMask.Both) as PhaseMask;
  }

  /** Only while configuring: the step wants a context per request, at most `max` open at once
   *  (capped at MAX_REQUEST_CONTEXTS). Returns the granted maximum, -1 outside configure. */
  requestContexts(max: number): number {
    if (!this.configuring) return -1;
    this.contextsWanted = Math.max(0, Math.min(max | 0, MAX_REQUEST_CONTEXTS));
    return this.contextsWanted;
  }

  // ---- properties ---------------------------------------------------------------------------

  /** A property as a string (numeric ones in decimal), null for an unknown id. */
  property(id: number): string | null {
    // The clock, the log level and the kv cap need no exchange, so plugins may read them while configuring too.
    if (id === Property.WallClockMs || id === Property.LogLevel || id === Property.KvMaxBytes) return String(this.number(id));
    const ex = this.current();
    switch (id) {
      case Property.Op: return (this.lastOp = ex.op);
      case Property.Db: return (this.lastDb = ex.db);
      case Property.Collection: return (this.lastColl = ex.collection);
      case Property.AppName: return (this.lastApp = ex.conn.appName);
      case Property.ClientAddress: return ex.conn.clientAddress;
      case Property.User: return ex.conn.user;
      case Property.PipelineId: return ex.pipelineId;
      case Property.Phase: return phaseName(ex.phase);
      case Property.Route: return ex.route ?? '';
      case Property.RequestId: case Property.ConnectionId:
      case Property.ElapsedNs: case Property.ReplyOk: case Property.ReplyCode:
        return String(this.number(id));
      default: return null;
    }
  }

  /** A numeric property without a decimal round trip; NaN for an id that has no number. */
  number(id: number): number {
    if (id === Property.WallClockMs) return Date.now();
    if (id === Property.LogLevel) return this.logLevel();
    if (id === Property.KvMaxBytes) return this.services.kv.maxBytes;
    const ex = this.current();
    switch (id) {
      case Property.RequestId: return ex.requestId;
      case Property.ConnectionId: return ex.conn.id;
      case Property.Phase: return ex.phase;
      case Property.ElapsedNs: return Math.round((this.readClock() - ex.startedAt) * 1e6);
      case Property.ReplyOk: return ex.phase === Phase.Response ? ex.replyOk() : -1;
      case Property.ReplyCode: return ex.phase === Phase.Response ? ex.replyCode() : 0;
      default: return NaN;
    }
  }

  // ---- log ----------------------------------------------------------------------------------

  /** The lowest level (ABI number) the step's logger writes: 0 (all) when it does not say. */
  private logLevel(): number {
    const level = this.services.logger.level;
    return level === undefined ? 0 : Math.max(0, LOG_LEVEL_NAMES.indexOf(level));
  }

  /**
   * A plain log line tagged with the step, pipeline and op; `cut`: characters of the message the
   * caller left out already (a core module's message is decoded up to MAX_PLUGIN_LOG_CHARS only).
   */
  log(level: number, msg: string, cut = 0): void {
    const name = LOG_LEVEL_NAMES[level] ?? 'info';
    if (msg.length > MAX_PLUGIN_LOG_CHARS) {
      cut += msg.length - MAX_PLUGIN_LOG_CHARS;
      msg = msg.slice(0, MAX_PLUGIN_LOG_CHARS);
    }
    if (cut > 0) msg = `${msg}… (${cut} more characters cut: a plugin's log line is at most ${MAX_PLUGIN_LOG_CHARS})`;
    if (this.configuring) this.configNotes.add(name, msg);
    const ex = this.ex;
    const s = this.services;
    s.logger[name](msg, { step: s.step, pipeline: s.pipelineId, op: ex === null ? undefined : ex.op });
  }

  /**
   * A structured log record: `members` is UTF-8 JSON object members (`"k":v,...`) that the logger
   * writes as fields of its own line without re-encoding them (valid during the call only). A
   * record that is not plausibly members (must start with `"`, no raw newline, which would split
   * the line) is logged as a plain message instead.
   */
  logRecord(level: number, members: Uint8Array): void {
    const name = LOG_LEVEL_NAMES[level] ?? 'info';
    const logger = this.services.logger;
    if (members.length > MAX_PLUGIN_LOG_CHARS) {
      logger[name](`a log record of ${members.length} bytes, over the ${MAX_PLUGIN_LOG_CHARS} a plugin's log line may be: not written`,
        { step: this.services.step, pipeline: this.services.pipelineId });
      return;
    }
    if (logger.record !== undefined && members.length > 0 && members[0] === 0x22 && members.indexOf(0x0a) < 0) {
      logger.record(name, this.recordPrefix, members);
      return;
    }
    logger[name](utf8.decode(members), { step: this.services.step, pipeline: this.services.pipelineId });
  }

  // ---- metrics ------------------------------------------------------------------------------

  /**
   * Defines a metric with these label names for this step's graph; returns its id (which observes
   * the series whose label values are all empty), or -1 when refused (logged with the reason).
   */
  defineMetric(kind: MetricKind, name: string, labelNames: readonly string[]): number {
    // The same definition again (a plugin defining its metric in a callback, not once in
    // on_configure) gets the same id: ids and their series would otherwise pile up per call.
    const same = `${kind}\0${name}\0${labelNames.join(',')}`;
    const known = this.definedIds.get(same);
    if (known !== undefined) return known;
    const s = this.services;
    // Refusals are kept too (-1, logged once each), up to a bound: a plugin defining names built
    // from request data must not grow this map, or log a line, per request.
    if (this.definedIds.size >= MAX_DEFINITIONS_PER_INSTANCE) {
      if (!this.definitionsFull) {
        this.definitionsFull = true;
        s.logger.warn(`plugin metric refused: the instance has made ${MAX_DEFINITIONS_PER_INSTANCE} distinct definitions (the most it keeps); ` +
          'further ones are refused without a log line', { step: s.step, metric: name });
      }
      return -1;
    }
    const binding = s.metrics.define(kind, name, labelNames, s.pipelineId, s.variant);
    if (typeof binding === 'string') {
      s.logger.warn(`plugin metric refused: ${binding}`, { step: s.step, metric: name });
      this.definedIds.set(same, -1);
      return -1;
    }
    const key = encodeLabelKey(labelNames.map(() => ''));
    // A labelled metric's own id takes a label set only when it is used: most never are.
    const own = labelNames.length === 0 ? binding.series(key)! : lazySeries(binding, key);
    const d: DefinedMetric = { binding, byKey: new Map(), idOf: new Map() };
    const id = this.addSeries(d, own, d);
    this.definedIds.set(same, id);
    return id;
  }

  /**
   * The id of one label set of metric `id` (`key`: the values as the ABI encodes them), -1 when
   * `id` is not a metric's own id or the count of values is not the declared one. One id per
   * series and instance, so ids stay few (at most MAX_LABEL_SETS + 1 per metric).
   */
  metricSeries(id: number, key: string): number {
    const d = this.defined[id];
    if (d === undefined || d === null) return -1;
    const known = d.byKey.get(key);
    if (known !== undefined) return known;
    const b = d.binding;
    const series = b.series(key);
    if (series === null) return -1;
    const sid = d.idOf.get(series) ?? this.addSeries(d, series, null);
    if (b.cacheable) d.byKey.set(key, sid);
    return sid;
  }

  private addSeries(d: DefinedMetric, series: BoundMetric, own: DefinedMetric | null): number {
    const id = this.metrics.length;
    this.metrics.push(series);
    this.defined.push(own);
    d.idOf.set(series, id);
    return id;
  }

  increment(id: number, delta: number): void {
    const m = this.metrics[id];
    if (m !== undefined) m.inc(delta);
  }

  record(id: number, value: number): void {
    const m = this.metrics[id];
    if (m !== undefined) m.record(value);
  }

  // ---- sub-operations -----------------------------------------------------------------------

  /** Whether the request running now records sub-operations (PluginServices.subopGate). */
  subopRecorded(): boolean {
    const gate = this.subopGate;
    if (gate === null) return true;
    const cur = gate.current;
    return cur === null ? this.subopDirect : cur.subops;
  }

  /**
   * CallFlag.TimeSubops when the call about to run times its sub-operations: a plugin built with
   * the SDK calls proxy_subop_begin / proxy_subop_end only then, so an untimed request crosses into
   * the host for none of them.
   */
  subopFlag(): number {
    return this.timesSubops && this.subopRecorded() ? CallFlag.TimeSubops : 0;
  }

  /** Opens a sub-operation; `name` null: one the request does not record (nested all the same, untimed). */
  subopBegin(name: string | null): void {
    const d = this.subopDepth++;
    if (d >= MAX_SUBOP_DEPTH) return;
    if (name === null) {
      this.subopStarts[d] = -1;
      return;
    }
    this.subopNames[d] = name;
    this.subopStarts[d] = stepNow();
  }

  subopEnd(): void {
    if (this.subopDepth === 0) return;
    const d = --this.subopDepth;
    const sink = this.services.subop;
    if (d >= MAX_SUBOP_DEPTH || sink === null) return;
    const start = this.subopStarts[d]!;
    if (start < 0) return;
    const ex = this.ex;
    sink(this.subopNames[d]!, ex === null ? Phase.Request : ex.phase, Math.round((stepNow() - start) * NS_PER_TICK));
  }

  // ---- kv and clock -------------------------------------------------------------------------

  kvGet(key: string): Uint8Array | undefined {
    return this.services.kv.get(key, this.kvNow());
  }

  /** `value` may be a view of plugin memory: the store copies it. False past the store's cap. */
  kvSet(key: string, value: Uint8Array, ttlMs: number): boolean {
    return this.services.kv.set(key, value, ttlMs, this.kvNow());
  }

  kvDelete(key: string): boolean {
    return this.services.kv.delete(key, this.kvNow());
  }

  // The same with the key as UTF-16LE bytes at mem[ptr, ptr + len) (a core module's memory):
  // read in place, never decoded into a string.

  kvGetAt(mem: Uint8Array, ptr: number, len: number): Uint8Array | undefined {
    return this.services.kv.getAt(mem, ptr, len, this.kvNow());
  }

  kvSetAt(mem: Uint8Array, ptr: number, len: number, value: Uint8Array, ttlMs: number): boolean {
    return this.services.kv.setAt(mem, ptr, len, value, ttlMs, this.kvNow());
  }

  /** kvGetAt() copying the value to mem[dst, dst + max) when it fits: its length, -1 when absent. */
  kvGetInto(mem: Uint8Array, ptr: number, len: number, dst: number, max: number): number {
    return this.services.kv.getInto(mem, ptr, len, mem, dst, max, this.kvNow());
  }

  /** kvSetAt() with the value at mem[valPtr, valPtr + valLen). */
  kvSetFrom(mem: Uint8Array, ptr: number, len: number, valPtr: number, valLen: number, ttlMs: number): boolean {
    return this.services.kv.setFrom(mem, ptr, len, mem, valPtr, valLen, ttlMs, this.kvNow());
  }

  kvDeleteAt(mem: Uint8Array, ptr: number, len: number): boolean {
    return this.services.kv.deleteAt(mem, ptr, len, this.kvNow());
  }

  /** Monotonic clock, ns (f64: exact to 2^53 ns ≈ 104 days of uptime, sub-µs resolution). */
  nowNs(): number {
    return this.readClock() * 1e6;
  }

  /** Reads the clock (always) and keeps the reading for the kv store (callNow). */
  private readClock(): number {
    const t = performance.now();
    if (this.callNow < 0) this.callNow = t;
    return t;
  }

  /** The reading the kv store takes: callNow once there is one, else undefined (the store then
   *  reads the clock itself, only when an answer depends on it). */
  private kvNow(): number | undefined {
    return this.callNow < 0 ? undefined : this.callNow;
  }
}

const utf8 = new TextDecoder();

/** A metric this instance defined: its label sets' ids by their key and by series. */
interface DefinedMetric {
  readonly binding: MetricBinding;
  readonly byKey: Map<string, number>;
  readonly idOf: Map<BoundMetric, number>;
}

/** The series of `key`, looked up at its first observation. */
function lazySeries(binding: MetricBinding, key: string): BoundMetric {
  let m: BoundMetric | null = null;
  return {
    inc(v) { (m ??= binding.series(key)!).inc(v); },
    record(v) { (m ??= binding.series(key)!).record(v); },
  };
}
