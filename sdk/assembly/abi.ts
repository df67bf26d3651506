// Generated from runtime/wasm/abi-spec.ts by `npm run abi`: edit that file, not this one.
// The plugin side of the host ABI: the host functions a plugin imports, the enums and the ABI
// version. Plugin code uses the SDK (index.ts) rather than these declarations.

/** The plugin ABI version this SDK speaks; the host refuses a plugin built for another. */
export const ABI_VERSION: i32 = 4;
/** Exported by every plugin (exports.ts re-exports it) as a constant global: the host reads it at load. */
export const proxy_abi_version: i32 = ABI_VERSION;
/** label names a metric may declare (the host adds pipeline_id and pipeline) */
export const MAX_METRIC_LABELS: i32 = 4;
/** label sets a metric holds per graph; past it, observations go to the set whose every label is `other`, counted in proxy_plugin_label_overflow_total{metric} */
export const MAX_LABEL_SETS: i32 = 1000;
/** characters of a label value the host keeps (longer values are cut) */
export const MAX_LABEL_VALUE_CHARS: i32 = 128;
/** request contexts open at once per instance; past it one is ended to make room, round robin (proxy_on_request_done) */
export const MAX_REQUEST_CONTEXTS: i32 = 65536;

/** What a phase callback returns. */
export const enum Action {
  /** go on with the next step */
  Continue = 0,
  /** skip the later steps of this phase (the request still goes upstream unless the step rejected or replied locally) */
  Stop = 1,
}

/** The side of an exchange a body function acts on. */
export const enum Phase {
  /** the command */
  Request = 0,
  /** the reply */
  Response = 1,
}

/** Flag bits passed to on_request / on_response. */
export const enum CallFlag {
  /** an earlier step replaced the body */
  BodyReplaced = 1,
  /** response phase: the reply was produced locally (a step replied without the upstream) */
  LocalReply = 2,
  /** the command carries OP_MSG document sequences: the size is -1 until the body is read */
  HasSequences = 4,
  /** the op equals the value this instance last read through proxy_get_property, so a string decoded then may be kept */
  SameOp = 8,
  /** likewise for db */
  SameDb = 16,
  /** likewise for collection */
  SameCollection = 32,
  /** likewise for appName */
  SameAppName = 64,
  /** sub-operations are timed in this call (profiling keeps this request's frame, or it is traced): without it a plugin does not call proxy_subop_begin / proxy_subop_end (the SDK's subop() does not) */
  TimeSubops = 128,
}

/** Ids for proxy_get_property / proxy_get_number. */
export const enum Property {
  /** command name */
  Op = 0,
  /** `$db` */
  Db = 1,
  /** collection (`getMore`: its `collection` field; `""` when none) */
  Collection = 2,
  /** the client's appName */
  AppName = 3,
  /** the client's address */
  ClientAddress = 4,
  /** the connection's user: the one it logged in to the proxy as (config `auth`), or one an auth step set since; `""` when anonymous */
  User = 5,
  /** pipeline id */
  PipelineId = 6,
  /** `request` / `response` (number: 0 / 1) */
  Phase = 7,
  /** the client's request id */
  RequestId = 8,
  /** the client connection's id */
  ConnectionId = 9,
  /** the upstream chosen so far (`""`) */
  Route = 10,
  /** wall-clock time, ms since the Unix epoch (for token expiry; proxy_now is monotonic); readable in on_configure too */
  WallClockMs = 11,
  /** ns since the proxy read the request off the socket */
  ElapsedNs = 12,
  /** the current reply's `ok`: 1 when 1/true, 0 otherwise, -1 no reply yet */
  ReplyOk = 13,
  /** the current reply's numeric `code`, 0 when none */
  ReplyCode = 14,
  /** the lowest LogLevel the proxy writes for this step (0 trace … 4 error): a line below it is dropped, so a step can skip building it; readable in on_configure too */
  LogLevel = 15,
  /** the cap of the step's host kv store in bytes (its `kv_max_bytes`); readable in on_configure too */
  KvMaxBytes = 16,
}

/** Bits of proxy_set_phases: the phases whose callback does something (the host never calls the others). */
export const enum Phases {
  Request = 1,
  Response = 2,
  Both = 3,
}

/** Kinds of proxy_define_metric. */
export const enum MetricKind {
  Counter = 0,
  Gauge = 1,
  Histogram = 2,
}

/** Levels of proxy_log / proxy_log_fields. */
export const enum LogLevel {
  Trace = 0,
  Debug = 1,
  Info = 2,
  Warn = 3,
  Error = 4,
}

/** copies the command (phase 0, document sequences folded in) or the reply (phase 1) to `dst` if it fits in `max` bytes; returns its size, -1 when there is none */
// @ts-ignore: decorator
@external("proxy", "proxy_get_body")
export declare function proxy_get_body(phase: i32, dst: usize, max: i32): i32;
/** offset of the bytes `[ptr, ptr+len)` in the body, -1 when absent (searched by the host, no copy) */
// @ts-ignore: decorator
@external("proxy", "proxy_body_find")
export declare function proxy_body_find(phase: i32, ptr: usize, len: i32): i32;
/** replaces the command / reply with the BSON at `[ptr, ptr+len)`; returns 0 */
// @ts-ignore: decorator
@external("proxy", "proxy_set_body")
export declare function proxy_set_body(phase: i32, ptr: usize, len: i32): i32;
/** rejects the request: the client gets `{ ok: 0, errmsg, code, codeName }`; later steps are skipped */
// @ts-ignore: decorator
@external("proxy", "proxy_reject")
export declare function proxy_reject(code: i32, namePtr: usize, nameLen: i32, msgPtr: usize, msgLen: i32): void;
/** request phase: answers with this BSON without the upstream; response phase: replaces the reply */
// @ts-ignore: decorator
@external("proxy", "proxy_reply_local")
export declare function proxy_reply_local(ptr: usize, len: i32): void;
/** sends the request to this upstream URI */
// @ts-ignore: decorator
@external("proxy", "proxy_set_route")
export declare function proxy_set_route(ptr: usize, len: i32): void;
/** records the identity an auth step established (the `user` property from then on, for this connection) */
// @ts-ignore: decorator
@external("proxy", "proxy_set_user")
export declare function proxy_set_user(ptr: usize, len: i32): void;
/** a log line (levels 0 trace … 4 error) tagged with the step, pipeline and op */
// @ts-ignore: decorator
@external("proxy", "proxy_log")
export declare function proxy_log(level: i32, ptr: usize, len: i32): void;
/** UTF-8 JSON object members (`"k":v,…`) written as fields of the host's line without re-encoding; members that do not start with `"` or contain a raw newline are logged as a plain message instead */
// @ts-ignore: decorator
@external("proxy", "proxy_log_fields")
export declare function proxy_log_fields(level: i32, ptr: usize, len: i32): void;
/** only during `proxy_on_configure`: the phases the step acts in (`PhaseMask`, SDK `Phases`); the pipeline skips the step in the others */
// @ts-ignore: decorator
@external("proxy", "proxy_set_phases")
export declare function proxy_set_phases(mask: i32): void;
/** only during `proxy_on_configure`: the step wants a context per request (at most `max` open, capped at `MAX_REQUEST_CONTEXTS`); it must export `proxy_on_request_done`, and gets contexts only when it acts in both phases. Returns the granted maximum */
// @ts-ignore: decorator
@external("proxy", "proxy_request_contexts")
export declare function proxy_request_contexts(max: i32): i32;
/** writes the property (`Property`) as UTF-16 to `dst` if it fits in `max` bytes; returns its byte length, -1 for an unknown id */
// @ts-ignore: decorator
@external("proxy", "proxy_get_property")
export declare function proxy_get_property(id: i32, dst: usize, max: i32): i32;
/** a numeric property (`Property` marked string or number) without a decimal round trip; NaN for other ids */
// @ts-ignore: decorator
@external("proxy", "proxy_get_number")
export declare function proxy_get_number(id: i32): f64;
/** defines (or reuses) a `proxy_plugin_*` metric of this kind (`MetricKind`) with these label names (UTF-16, comma-separated, `""` for none; at most `MAX_METRIC_LABELS`); returns its id (which observes the series whose label values are all empty), -1 when refused: bad name or label names, or the name exists with another kind */
// @ts-ignore: decorator
@external("proxy", "proxy_define_metric")
export declare function proxy_define_metric(kind: i32, namePtr: usize, nameLen: i32, labelsPtr: usize, labelsLen: i32): i32;
/** the id of one label set of metric `id`: the values (UTF-16, each preceded by one unit holding its length in units), one per declared label; -1 for another count. Past `MAX_LABEL_SETS` sets the `other` set (observations counted as overflow). Ids are stable for the instance: a plugin may keep them */
// @ts-ignore: decorator
@external("proxy", "proxy_metric_series")
export declare function proxy_metric_series(id: i32, valuesPtr: usize, valuesLen: i32): i32;
/** adds `delta` to a counter or gauge series (a histogram observes it) */
// @ts-ignore: decorator
@external("proxy", "proxy_increment_metric")
export declare function proxy_increment_metric(id: i32, delta: f64): void;
/** sets a gauge series / observes a histogram value */
// @ts-ignore: decorator
@external("proxy", "proxy_record_metric")
export declare function proxy_record_metric(id: i32, value: f64): void;
/** opens a named sub-operation (flame graph third level, trace sub-span); they nest */
// @ts-ignore: decorator
@external("proxy", "proxy_subop_begin")
export declare function proxy_subop_begin(namePtr: usize, nameLen: i32): void;
/** closes the innermost sub-operation */
// @ts-ignore: decorator
@external("proxy", "proxy_subop_end")
export declare function proxy_subop_end(): void;
/** the value's size (copied to `dst` if it fits in `max`), -1 when absent or expired */
// @ts-ignore: decorator
@external("proxy", "proxy_kv_get")
export declare function proxy_kv_get(keyPtr: usize, keyLen: i32, dst: usize, max: i32): i32;
/** stores a value (ttlMs 0: no expiry); 0, or -1 for a value larger than the whole store */
// @ts-ignore: decorator
@external("proxy", "proxy_kv_set")
export declare function proxy_kv_set(keyPtr: usize, keyLen: i32, valPtr: usize, valLen: i32, ttlMs: i32): i32;
/** 0 when the key existed, -1 otherwise */
// @ts-ignore: decorator
@external("proxy", "proxy_kv_delete")
export declare function proxy_kv_delete(keyPtr: usize, keyLen: i32): i32;
/** monotonic clock, ns (an f64: an i64 result would cost a BigInt per call) */
// @ts-ignore: decorator
@external("proxy", "proxy_now")
export declare function proxy_now(): f64;
/** AssemblyScript `abort` (asconfig `use: abort=…/abortHandler`): a step error with the message and source position */
// @ts-ignore: decorator
@external("proxy", "proxy_abort")
export declare function proxy_abort(msgPtr: usize, filePtr: usize, line: u32, column: u32): void;
