// The host ABI, defined once (STYLE.md 11). Everything else is generated from this file or checked
// against it by a test:
//   sdk/assembly/abi.ts   AssemblyScript import declarations, enums, ABI_VERSION  (generated)
//   sdk/wit/step.wit      the WIT world of component steps                         (generated)
//   docs/plugins.md       the "Host ABI" tables                                   (generated)
//   runtime/wasm/abi.ts   the host's enums and names                              (derived at import)
//   host functions        PluginInstance / ComponentInstance provide exactly these (test/wasm/abi.test.ts)
//   built plugins         import only these, with these signatures                (test/wasm/abi.test.ts, and at load)
// Regenerate with `npm run abi` (node --import tsx runtime/wasm/abi-render.ts --write).
//
// Anchored on proxy-wasm (github.com/proxy-wasm/spec): callbacks carry sizes, the plugin pulls
// bytes into memory it allocated itself. Strings cross the boundary as UTF-16LE (pointer + byte
// length, AssemblyScript's native layout) so neither side allocates an encoded copy; the step
// config is UTF-8 JSON; BSON and kv values are raw bytes.

/**
 * Bump on every change a built plugin could notice (a host function added, removed or changed, an
 * enum value, a callback's meaning). A plugin exports the version it was built for (the global
 * ABI_VERSION_EXPORT, from the SDK); the host refuses any other at load. Components carry it as
 * the WIT package version 0.<ABI_VERSION>.0.
 *   1  first versioned ABI
 *   2  labelled metrics: proxy_define_metric takes label names, proxy_metric_series resolves label values
 *   3  per-request contexts: proxy_request_contexts, a context argument to the phase callbacks, proxy_on_request_done
 *   4  CallFlag.TimeSubops: sub-operations are reported only in a call that carries it
 */
export const ABI_VERSION = 4;

/** Import namespace of every host function of a core module. */
export const IMPORT_MODULE = 'proxy';

/** The exported i32 global holding the ABI version a core module was built for. */
export const ABI_VERSION_EXPORT = 'proxy_abi_version';

/** WIT package of the component world; its version carries ABI_VERSION. */
export const WIT_PACKAGE = 'proxy:step';
export const WIT_VERSION = `0.${ABI_VERSION}.0`;

// ---- limits -------------------------------------------------------------------------------------

export interface Limit { readonly name: string; readonly value: number; readonly doc: string }

/** Bounds the host enforces; the SDK gets them as constants. */
export const LIMITS: readonly Limit[] = [
  { name: 'MAX_METRIC_LABELS', value: 4, doc: 'label names a metric may declare (the host adds pipeline_id and pipeline)' },
  { name: 'MAX_LABEL_SETS', value: 1000, doc: 'label sets a metric holds per graph; past it, observations go to the set whose every label is ' +
    '`other`, counted in proxy_plugin_label_overflow_total{metric}' },
  { name: 'MAX_LABEL_VALUE_CHARS', value: 128, doc: 'characters of a label value the host keeps (longer values are cut)' },
  { name: 'MAX_REQUEST_CONTEXTS', value: 65536, doc: 'request contexts open at once per instance; past it one is ended to make room, round robin ' +
    '(proxy_on_request_done)' },
];

export function limit(name: string): number {
  const l = LIMITS.find((x) => x.name === name);
  if (l === undefined) throw new Error(`abi-spec.ts has no limit ${name}`);
  return l.value;
}

// ---- enums -------------------------------------------------------------------------------------

export interface EnumMember {
  readonly value: number;
  readonly doc?: string;
  /** Name of the case in the WIT enum (when the enum has one). */
  readonly wit?: string;
}

export interface EnumSpec<M extends Record<string, EnumMember> = Record<string, EnumMember>> {
  readonly name: string;
  /** The name in the AssemblyScript SDK when it differs. */
  readonly sdkName: string;
  readonly doc: string;
  /** Bit flags (the docs list them as `Name value`). */
  readonly flags: boolean;
  /** The WIT enum it maps to, if any (cases in `wit` of each member, in value order). */
  readonly wit: string | null;
  readonly witDoc: string | null;
  readonly members: M;
}

function defineEnum<const M extends Record<string, EnumMember>>(
  name: string, doc: string, members: M, opts: { sdkName?: string; flags?: boolean; wit?: string; witDoc?: string } = {},
): EnumSpec<M> {
  return { name, sdkName: opts.sdkName ?? name, doc, flags: opts.flags ?? false, wit: opts.wit ?? null, witDoc: opts.witDoc ?? null, members };
}

/** `{ Name: value }` of an enum spec, with literal types (what the host code uses). */
export function enumValues<const M extends Record<string, EnumMember>>(e: EnumSpec<M>): { readonly [K in keyof M]: M[K]['value'] } {
  const out: Record<string, number> = {};
  for (const [k, m] of Object.entries(e.members)) out[k] = m.value;
  return out as { readonly [K in keyof M]: M[K]['value'] };
}

export const ACTION = defineEnum('Action', 'What a phase callback returns.', {
  Continue: { value: 0, doc: 'go on with the next step' },
  Stop: { value: 1, doc: 'skip the later steps of this phase (the request still goes upstream unless the step rejected or replied locally)' },
});

export const PHASE = defineEnum('Phase', 'The side of an exchange a body function acts on.', {
  Request: { value: 0, doc: 'the command', wit: 'request' },
  Response: { value: 1, doc: 'the reply', wit: 'response' },
}, { wit: 'phase', witDoc: 'Request or reply side of an exchange (core ABI: 0 / 1).' });

export const CALL_FLAG = defineEnum('CallFlag', 'Flag bits passed to on_request / on_response.', {
  BodyReplaced: { value: 1, doc: 'an earlier step replaced the body' },
  LocalReply: { value: 2, doc: 'response phase: the reply was produced locally (a step replied without the upstream)' },
  HasSequences: { value: 4, doc: 'the command carries OP_MSG document sequences: the size is -1 until the body is read' },
  SameOp: { value: 8, doc: 'the op equals the value this instance last read through proxy_get_property, so a string decoded then may be kept' },
  SameDb: { value: 16, doc: 'likewise for db' },
  SameCollection: { value: 32, doc: 'likewise for collection' },
  SameAppName: { value: 64, doc: 'likewise for appName' },
  TimeSubops: { value: 128, doc: 'sub-operations are timed in this call (profiling keeps this request\'s frame, or it is traced): without it a ' +
    'plugin does not call proxy_subop_begin / proxy_subop_end (the SDK\'s subop() does not)' },
}, { flags: true });

/** Property kinds: `string` properties are read with proxy_get_property, `both` with either it
 *  (in decimal) or proxy_get_number. Components read every property as a string. */
export type PropertyKind = 'string' | 'both';
interface PropertyMember extends EnumMember { readonly wit: string; readonly kind: PropertyKind }

export const PROPERTY = defineEnum('Property', 'Ids for proxy_get_property / proxy_get_number.', {
  Op: { value: 0, wit: 'op', kind: 'string', doc: 'command name' },
  Db: { value: 1, wit: 'db', kind: 'string', doc: '`$db`' },
  Collection: { value: 2, wit: 'collection', kind: 'string', doc: 'collection (`getMore`: its `collection` field; `""` when none)' },
  AppName: { value: 3, wit: 'app-name', kind: 'string', doc: 'the client\'s appName' },
  ClientAddress: { value: 4, wit: 'client-address', kind: 'string', doc: 'the client\'s address' },
  User: { value: 5, wit: 'user', kind: 'string', doc: 'the connection\'s user: the one it logged in to the proxy as (config `auth`), or one an ' +
    'auth step set since; `""` when anonymous' },
  PipelineId: { value: 6, wit: 'pipeline-id', kind: 'string', doc: 'pipeline id' },
  Phase: { value: 7, wit: 'phase', kind: 'both', doc: '`request` / `response` (number: 0 / 1)' },
  RequestId: { value: 8, wit: 'request-id', kind: 'both', doc: 'the client\'s request id' },
  ConnectionId: { value: 9, wit: 'connection-id', kind: 'both', doc: 'the client connection\'s id' },
  Route: { value: 10, wit: 'route', kind: 'string', doc: 'the upstream chosen so far (`""`)' },
  WallClockMs: { value: 11, wit: 'wall-clock-ms', kind: 'both', doc: 'wall-clock time, ms since the Unix epoch (for token expiry; proxy_now is ' +
    'monotonic); readable in on_configure too' },
  ElapsedNs: { value: 12, wit: 'elapsed-ns', kind: 'both', doc: 'ns since the proxy read the request off the socket' },
  ReplyOk: { value: 13, wit: 'reply-ok', kind: 'both', doc: 'the current reply\'s `ok`: 1 when 1/true, 0 otherwise, -1 no reply yet' },
  ReplyCode: { value: 14, wit: 'reply-code', kind: 'both', doc: 'the current reply\'s numeric `code`, 0 when none' },
  LogLevel: { value: 15, wit: 'log-level', kind: 'both', doc: 'the lowest LogLevel the proxy writes for this step (0 trace … 4 error): a line ' +
    'below it is dropped, so a step can skip building it; readable in on_configure too' },
  KvMaxBytes: { value: 16, wit: 'kv-max-bytes', kind: 'both', doc: 'the cap of the step\'s host kv store in bytes (its `kv_max_bytes`); readable ' +
    'in on_configure too' },
} satisfies Record<string, PropertyMember>, {
  wit: 'property',
  witDoc: 'Core ABI Property ids, in the same order. Numeric properties (the ids, phase, wall clock, elapsed-ns, reply-ok, reply-code, log-level, ' +
    'kv-max-bytes) are decimal strings here.',
});

// The host's TypeScript names a set of phases `PhaseMask` (one phase is `Phase`); the SDK keeps `Phases`.
export const PHASE_MASK = defineEnum('PhaseMask', 'Bits of proxy_set_phases: the phases whose callback does something (the host never calls the others).', {
  Request: { value: 1 },
  Response: { value: 2 },
  Both: { value: 3 },
}, { sdkName: 'Phases', flags: true });

export const METRIC_KIND = defineEnum('MetricKind', 'Kinds of proxy_define_metric.', {
  Counter: { value: 0, wit: 'counter' },
  Gauge: { value: 1, wit: 'gauge' },
  Histogram: { value: 2, wit: 'histogram' },
}, { wit: 'metric-kind', witDoc: 'Core ABI MetricKind 0..2.' });

export const LOG_LEVEL = defineEnum('LogLevel', 'Levels of proxy_log / proxy_log_fields.', {
  Trace: { value: 0, wit: 'trace' },
  Debug: { value: 1, wit: 'debug' },
  Info: { value: 2, wit: 'info' },
  Warn: { value: 3, wit: 'warn' },
  Error: { value: 4, wit: 'error' },
}, { wit: 'log-level', witDoc: 'Core ABI LogLevel 0..4.' });

/** Every enum, in the order the generated files list them. */
export const ENUMS: readonly EnumSpec[] = [ACTION, PHASE, CALL_FLAG, PROPERTY, PHASE_MASK, METRIC_KIND, LOG_LEVEL];

// ---- core module: host functions (imports) and callbacks (exports) -----------------------------

/** Core value types: `ptr` is an i32 address in plugin memory (AssemblyScript `usize`), `u32` an
 *  i32 read as unsigned. */
export type CoreType = 'i32' | 'u32' | 'ptr' | 'f64';

export interface WitFunction {
  /** kebab-case name in `interface host` (jco calls it in camelCase). */
  readonly name: string;
  readonly params: readonly (readonly [string, string])[];
  readonly result: string | null;
  /** When the component form differs from the core one in more than marshalling. */
  readonly doc?: string;
}

export interface HostFunction {
  readonly name: string;
  readonly params: readonly (readonly [string, CoreType])[];
  readonly result: CoreType | null;
  /** One line: the docs table and the SDK declaration's comment. */
  readonly doc: string;
  /** The component form (`interface host` of the WIT world); null: core modules only. */
  readonly wit: WitFunction | null;
  /** Added by the host's metering pass, never imported by plugin code. */
  readonly hostAdded?: boolean;
}

const fn = (name: string, params: HostFunction['params'], result: CoreType | null, doc: string, wit: WitFunction | null, hostAdded = false): HostFunction =>
  ({ name, params, result, doc, wit, hostAdded });
const wit = (name: string, params: WitFunction['params'], result: string | null, doc?: string): WitFunction => ({ name, params, result, doc });

export const HOST_FUNCTIONS: readonly HostFunction[] = [
  fn('proxy_get_body', [['phase', 'i32'], ['dst', 'ptr'], ['max', 'i32']], 'i32',
    'copies the command (phase 0, document sequences folded in) or the reply (phase 1) to `dst` if it fits in `max` bytes; returns its size, -1 ' +
      'when there is none',
    wit('get-body', [['which', 'phase']], 'option<list<u8>>',
      'The command (document sequences folded in, or the replacement if a step set one) or the reply document (replacement, upstream reply or ' +
        'local reply), BSON. None: there is none.')),
  fn('proxy_body_find', [['phase', 'i32'], ['ptr', 'ptr'], ['len', 'i32']], 'i32',
    'offset of the bytes `[ptr, ptr+len)` in the body, -1 when absent (searched by the host, no copy)',
    wit('body-find', [['which', 'phase'], ['bytes', 'list<u8>']], 's32',
      'Offset of the first occurrence of these bytes in the command or reply (-1: absent), searched by the host without copying the body: a cheap ' +
        'pre-check before get-body.')),
  fn('proxy_set_body', [['phase', 'i32'], ['ptr', 'ptr'], ['len', 'i32']], 'i32',
    'replaces the command / reply with the BSON at `[ptr, ptr+len)`; returns 0',
    wit('set-body', [['which', 'phase'], ['bson', 'list<u8>']], null, 'Replaces the command or the reply with this BSON document.')),
  fn('proxy_reject', [['code', 'i32'], ['namePtr', 'ptr'], ['nameLen', 'i32'], ['msgPtr', 'ptr'], ['msgLen', 'i32']], null,
    'rejects the request: the client gets `{ ok: 0, errmsg, code, codeName }`; later steps are skipped',
    wit('reject', [['code', 's32'], ['code-name', 'string'], ['message', 'string']], null,
      'Rejects the request: the client gets {ok: 0, errmsg: message, code, codeName}; later steps are skipped. Return `stop` (1) from on-request afterwards.')),
  fn('proxy_reply_local', [['ptr', 'ptr'], ['len', 'i32']], null,
    'request phase: answers with this BSON without the upstream; response phase: replaces the reply',
    wit('reply-local', [['bson', 'list<u8>']], null,
      'Request phase: answers with this BSON document without calling the upstream. Response phase: replaces the reply.')),
  fn('proxy_set_route', [['ptr', 'ptr'], ['len', 'i32']], null, 'sends the request to this upstream URI',
    wit('set-route', [['uri', 'string']], null, 'Sends the request to this upstream URI.')),
  fn('proxy_set_user', [['ptr', 'ptr'], ['len', 'i32']], null,
    'records the identity an auth step established (the `user` property from then on, for this connection)',
    wit('set-user', [['name', 'string']], null, 'Records the identity an auth step established (the `user` property from now on, for this connection).')),
  fn('proxy_log', [['level', 'i32'], ['ptr', 'ptr'], ['len', 'i32']], null,
    'a log line (levels 0 trace … 4 error) tagged with the step, pipeline and op',
    wit('log', [['level', 'log-level'], ['message', 'string']], null)),
  fn('proxy_log_fields', [['level', 'i32'], ['ptr', 'ptr'], ['len', 'i32']], null,
    'UTF-8 JSON object members (`"k":v,…`) written as fields of the host\'s line without re-encoding; members that do not start with `"` or ' +
      'contain a raw newline are logged as a plain message instead',
    wit('log-fields', [['level', 'log-level'], ['members', 'string']], null,
      'A structured line: JSON object members (`"k":v,...`, no braces) written as fields of the proxy\'s own log line (after time, level, logger, ' +
        'step, pipeline) without re-encoding.')),
  fn('proxy_set_phases', [['mask', 'i32']], null,
    'only during `proxy_on_configure`: the phases the step acts in (`PhaseMask`, SDK `Phases`); the pipeline skips the step in the others',
    null),
  fn('proxy_request_contexts', [['max', 'i32']], 'i32',
    'only during `proxy_on_configure`: the step wants a context per request (at most `max` open, capped at `MAX_REQUEST_CONTEXTS`); it must export ' +
      '`proxy_on_request_done`, and gets contexts only when it acts in both phases. Returns the granted maximum',
    null),
  fn('proxy_get_property', [['id', 'i32'], ['dst', 'ptr'], ['max', 'i32']], 'i32',
    'writes the property (`Property`) as UTF-16 to `dst` if it fits in `max` bytes; returns its byte length, -1 for an unknown id',
    wit('get-property', [['name', 'property']], 'option<string>', 'Request property; none for an unknown id.')),
  fn('proxy_get_number', [['id', 'i32']], 'f64',
    'a numeric property (`Property` marked string or number) without a decimal round trip; NaN for other ids',
    null),
  fn('proxy_define_metric', [['kind', 'i32'], ['namePtr', 'ptr'], ['nameLen', 'i32'], ['labelsPtr', 'ptr'], ['labelsLen', 'i32']], 'i32',
    'defines (or reuses) a `proxy_plugin_*` metric of this kind (`MetricKind`) with these label names (UTF-16, comma-separated, `""` for none; at ' +
      'most `MAX_METRIC_LABELS`); returns its id (which observes the series whose label values are all empty), -1 when refused: bad name or label ' +
      'names, or the name exists with another kind',
    wit('define-metric', [['kind', 'metric-kind'], ['name', 'string'], ['labels', 'list<string>']], 'option<u32>',
      'Names must match proxy_plugin_[a-z0-9_]+, label names [a-z_][a-z0-9_]* (at most 4; the host adds pipeline_id and pipeline). Returns an id, ' +
        'or none when refused.')),
  fn('proxy_metric_series', [['id', 'i32'], ['valuesPtr', 'ptr'], ['valuesLen', 'i32']], 'i32',
    'the id of one label set of metric `id`: the values (UTF-16, each preceded by one unit holding its length in units), one per declared label; ' +
      '-1 for another count. Past `MAX_LABEL_SETS` sets the `other` set (observations counted as overflow). Ids are stable for the instance: a ' +
      'plugin may keep them',
    wit('metric-series', [['id', 'u32'], ['values', 'list<string>']], 'option<u32>',
      'The id of one label set of a metric: one value per declared label. Past the cap (1000 sets per metric) the set whose every label is ' +
        '"other". None for another count of values.')),
  fn('proxy_increment_metric', [['id', 'i32'], ['delta', 'f64']], null, 'adds `delta` to a counter or gauge series (a histogram observes it)',
    wit('increment-metric', [['id', 'u32'], ['delta', 'f64']], null)),
  fn('proxy_record_metric', [['id', 'i32'], ['value', 'f64']], null, 'sets a gauge series / observes a histogram value',
    wit('record-metric', [['id', 'u32'], ['value', 'f64']], null)),
  fn('proxy_subop_begin', [['namePtr', 'ptr'], ['nameLen', 'i32']], null,
    'opens a named sub-operation (flame graph third level, trace sub-span); they nest',
    wit('subop-begin', [['name', 'string']], null, 'Named sub-operation (flame graph third level, trace sub-span); begin/end nest.')),
  fn('proxy_subop_end', [], null, 'closes the innermost sub-operation', wit('subop-end', [], null)),
  fn('proxy_kv_get', [['keyPtr', 'ptr'], ['keyLen', 'i32'], ['dst', 'ptr'], ['max', 'i32']], 'i32',
    'the value\'s size (copied to `dst` if it fits in `max`), -1 when absent or expired',
    wit('kv-get', [['key', 'string']], 'option<list<u8>>', 'Host-side key/value store of the step (survives instance rebuilds and reloads).')),
  fn('proxy_kv_set', [['keyPtr', 'ptr'], ['keyLen', 'i32'], ['valPtr', 'ptr'], ['valLen', 'i32'], ['ttlMs', 'i32']], 'i32',
    'stores a value (ttlMs 0: no expiry); 0, or -1 for a value larger than the whole store',
    wit('kv-set', [['key', 'string'], ['value', 'list<u8>'], ['ttl-ms', 'u32']], 'bool',
      'False when the value is larger than the whole store. ttl-ms 0 = no expiry.')),
  fn('proxy_kv_delete', [['keyPtr', 'ptr'], ['keyLen', 'i32']], 'i32', '0 when the key existed, -1 otherwise',
    wit('kv-delete', [['key', 'string']], 'bool')),
  fn('proxy_now', [], 'f64', 'monotonic clock, ns (an f64: an i64 result would cost a BigInt per call)',
    wit('now-ns', [], 'u64', 'Monotonic clock, nanoseconds.')),
  fn('proxy_abort', [['msgPtr', 'ptr'], ['filePtr', 'ptr'], ['line', 'u32'], ['column', 'u32']], null,
    'AssemblyScript `abort` (asconfig `use: abort=…/abortHandler`): a step error with the message and source position',
    null),
  fn('proxy_fuel_exhausted', [], null, 'called by the host\'s metering code when the fuel runs out: a step error', null, true),
];

export interface CoreExport {
  readonly name: string;
  readonly kind: 'memory' | 'function' | 'global';
  readonly params?: readonly (readonly [string, CoreType])[];
  readonly result?: CoreType | null;
  readonly doc: string;
  /** Must a plugin export it? (callbacks it does not export are not called) */
  readonly required: boolean;
  readonly hostAdded?: boolean;
}

export const CORE_EXPORTS: readonly CoreExport[] = [
  { name: 'memory', kind: 'memory', doc: 'the plugin\'s own memory (imported memory is refused)', required: true },
  { name: ABI_VERSION_EXPORT, kind: 'global', result: 'i32', doc: 'the ABI version the plugin was built for (the SDK exports it); any other than ' +
    'the host\'s is refused at load', required: true },
  { name: 'proxy_alloc', kind: 'function', params: [['size', 'i32']], result: 'ptr', doc: 'a buffer for the config', required: false },
  { name: 'proxy_on_configure', kind: 'function', params: [['ptr', 'ptr'], ['len', 'i32']], result: 'i32', doc: 'config JSON (UTF-8); non-zero ' +
    'refuses it', required: false },
  { name: 'proxy_on_request', kind: 'function', params: [['bodySize', 'i32'], ['flags', 'i32'], ['context', 'i32']], result: 'i32',
    doc: '`Action`; `bodySize` -1 with `HasSequences`; `context`: this request\'s context, a number below the granted maximum that no other open ' +
    'request has (-1 without contexts)', required: false },
  { name: 'proxy_on_response', kind: 'function', params: [['replySize', 'i32'], ['flags', 'i32'], ['context', 'i32']], result: 'i32',
    doc: '`Action`; `context`: the one its request phase got (-1: none, e.g. an earlier step answered locally). The context ends when this returns',
    required: false },
  { name: 'proxy_on_request_done', kind: 'function', params: [['context', 'i32']], result: null, doc: 'a request ended without the response ' +
    'callback (a later step rejected it, no reply was due, the upstream call failed, its connection went away: noticed at the connection\'s next ' +
    'request, or when all contexts are open and one is ended for room); host functions that need a request trap here', required: false },
  { name: '__proxy_fuel', kind: 'global', result: 'i32', doc: 'remaining fuel of the current call, added by the host\'s metering pass',
    required: false, hostAdded: true },
];

// ---- component: the `step` interface the plugin exports ---------------------------------------

export const WIT_STEP_EXPORTS: readonly WitFunction[] = [
  wit('configure', [['config', 'string']], 'bool', 'The step\'s config object as JSON; false refuses it (the pipeline does not load).'),
  wit('on-request', [['body-size', 's32'], ['call-flags', 's32']], 's32'),
  wit('on-response', [['reply-size', 's32'], ['call-flags', 's32']], 's32'),
];

/** The core value type of a CoreType, as the binary and WebAssembly.Module reflection name it. */
export function wasmType(t: CoreType): 'i32' | 'f64' {
  return t === 'f64' ? 'f64' : 'i32';
}
