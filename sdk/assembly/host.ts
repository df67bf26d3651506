// Host imports: the plugin side of the ABI (runtime/wasm/abi.ts is the host side; keep both in step).
// Strings cross the boundary as UTF-16LE (AssemblyScript's native form: pointer + byte length) so
// neither side allocates an encoded copy; byte payloads (BSON, kv values) are raw.

// @ts-ignore: decorator
@external("proxy", "proxy_get_body")
export declare function proxy_get_body(phase: i32, dst: usize, max: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_body_find")
export declare function proxy_body_find(phase: i32, ptr: usize, len: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_set_body")
export declare function proxy_set_body(phase: i32, ptr: usize, len: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_reject")
export declare function proxy_reject(code: i32, namePtr: usize, nameLen: i32, msgPtr: usize, msgLen: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_reply_local")
export declare function proxy_reply_local(ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_set_route")
export declare function proxy_set_route(ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_set_user")
export declare function proxy_set_user(ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_log")
export declare function proxy_log(level: i32, ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_set_phases")
export declare function proxy_set_phases(mask: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_log_fields")
export declare function proxy_log_fields(level: i32, ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_get_number")
export declare function proxy_get_number(id: i32): f64;
// @ts-ignore: decorator
@external("proxy", "proxy_get_property")
export declare function proxy_get_property(id: i32, dst: usize, max: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_define_metric")
export declare function proxy_define_metric(kind: i32, namePtr: usize, nameLen: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_increment_metric")
export declare function proxy_increment_metric(id: i32, delta: f64): void;
// @ts-ignore: decorator
@external("proxy", "proxy_record_metric")
export declare function proxy_record_metric(id: i32, value: f64): void;
// @ts-ignore: decorator
@external("proxy", "proxy_subop_begin")
export declare function proxy_subop_begin(namePtr: usize, nameLen: i32): void;
// @ts-ignore: decorator
@external("proxy", "proxy_subop_end")
export declare function proxy_subop_end(): void;
// @ts-ignore: decorator
@external("proxy", "proxy_kv_get")
export declare function proxy_kv_get(keyPtr: usize, keyLen: i32, dst: usize, max: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_kv_set")
export declare function proxy_kv_set(keyPtr: usize, keyLen: i32, valPtr: usize, valLen: i32, ttlMs: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_kv_delete")
export declare function proxy_kv_delete(keyPtr: usize, keyLen: i32): i32;
// @ts-ignore: decorator
@external("proxy", "proxy_now")
export declare function proxy_now(): f64;
// @ts-ignore: decorator
@external("proxy", "proxy_abort")
export declare function proxy_abort(msgPtr: usize, filePtr: usize, line: u32, column: u32): void;

/** Property ids for proxy_get_property (runtime/wasm/abi.ts `Property`). */
export const enum Property {
  Op = 0, Db = 1, Collection = 2, AppName = 3, ClientAddress = 4, User = 5,
  PipelineId = 6, Phase = 7, RequestId = 8, ConnectionId = 9, Route = 10,
  /** Wall-clock time, milliseconds since the Unix epoch (for token expiry; proxy_now is monotonic). */
  WallClockMs = 11,
  /** Numeric only (proxy_get_number): ns since the proxy read the request. */
  ElapsedNs = 12,
  /** Numeric only: the reply's ok — 1 ok, 0 not ok, -1 no reply. */
  ReplyOk = 13,
  /** Numeric only: the reply's numeric `code`, 0 if none. */
  ReplyCode = 14,
}

/** Flag bits of proxy_on_request / proxy_on_response (runtime/wasm/abi.ts `CallFlag`). */
export const enum CallFlag { BodyReplaced = 1, LocalReply = 2, HasSequences = 4, SameOp = 8, SameDb = 16, SameCollection = 32, SameAppName = 64 }

/** Routes AssemblyScript's `abort` (asconfig `use: abort=…`) to the host, which turns it into a trap. */
export function abortHandler(message: string | null, fileName: string | null, line: u32, column: u32): void {
  proxy_abort(changetype<usize>(message), changetype<usize>(fileName), line, column);
  unreachable();
}

// @ts-ignore: decorator
@inline export function strPtr(s: string): usize { return changetype<usize>(s); }
// @ts-ignore: decorator
@inline export function strLen(s: string): i32 { return s.length << 1; }
