// The host ABI, host side. sdk/assembly/host.ts is the plugin side; keep both in step.
// Anchored on proxy-wasm (github.com/proxy-wasm/spec): callbacks carry sizes, the plugin pulls
// bytes into memory it allocated itself. Strings cross the boundary as UTF-16LE (pointer + byte
// length, AssemblyScript's native layout) so neither side allocates an encoded copy; the step
// config is UTF-8 JSON; BSON and kv values are raw bytes.

/** Import namespace of every host function. */
export const IMPORT_MODULE = 'proxy';

/** Plugin exports. Only the callbacks a module exports are called. */
export const Export = {
  memory: 'memory',
  alloc: 'proxy_alloc', // (size: i32) -> ptr
  onConfigure: 'proxy_on_configure', // (cfgPtr, cfgLen) -> i32, non-zero = refused
  onRequest: 'proxy_on_request', // (bodySize, flags) -> i32 Action
  onResponse: 'proxy_on_response', // (replySize, flags) -> i32 Action
  /** Added by the metering pass (metering.ts): remaining fuel of the current call. */
  fuel: '__proxy_fuel',
} as const;

/** Return value of on_request / on_response. */
export const enum Action { Continue = 0, Stop = 1 }

/** Flag bits passed to on_request / on_response. */
export const enum CallFlag {
  BodyReplaced = 1, LocalReply = 2, HasSequences = 4,
  /** The op / db / collection / appName equals the value this instance last read through proxy_get_property,
   *  so a plugin may keep the string it decoded then (most traffic repeats its namespace). */
  SameOp = 8, SameDb = 16, SameCollection = 32, SameAppName = 64,
}

/** Ids for proxy_get_property. */
export const enum Property {
  Op = 0, Db = 1, Collection = 2, AppName = 3, ClientAddress = 4, User = 5,
  PipelineId = 6, Phase = 7, RequestId = 8, ConnectionId = 9, Route = 10,
  /** Wall-clock time, milliseconds since the Unix epoch (for token expiry; proxy_now is monotonic). */
  WallClockMs = 11,
  /** Numeric only (proxy_get_number): ns since the proxy read the request off the socket. */
  ElapsedNs = 12,
  /** Numeric only: the current reply's `ok` — 1 when it is 1/true, 0 otherwise, -1 no reply yet. */
  ReplyOk = 13,
  /** Numeric only: the current reply's numeric `code`, 0 when it has none. */
  ReplyCode = 14,
}

/** Bits of proxy_set_phases: the phases whose callback does something (others are not called). */
export const enum PhaseBit { Request = 1, Response = 2, Both = 3 }

export const enum MetricKind { Counter = 0, Gauge = 1, Histogram = 2 }

export const enum LogLevel { Trace = 0, Debug = 1, Info = 2, Warn = 3, Error = 4 }
export const LOG_LEVEL_NAMES = ['trace', 'debug', 'info', 'warn', 'error'] as const;

/** Plugin metric names must match this (SPEC §2.5 `proxy_plugin_<...>`). */
export const PLUGIN_METRIC_NAME = /^proxy_plugin_[a-z0-9_]+$/;

/** Default instruction budget per callback (function entries + loop iterations). */
export const DEFAULT_FUEL = 50_000_000;
/** WebAssembly page size. */
export const PAGE_BYTES = 65536;
