import {
  proxy_get_body, proxy_set_body, proxy_body_find, proxy_reject, proxy_reply_local, proxy_set_route, proxy_set_user,
  proxy_get_property, proxy_get_number, Property, CallFlag, Action, Phase, strPtr, strLen,
} from "./host";
import { RequestContext } from "./request";

/** Per-callback view of the exchange. One object is reused for every callback (no allocation);
 *  everything is pulled from the host lazily and cached until the callback returns. */
export class Context {
  phase: Phase = Phase.Request;
  /** Byte size of the body the host offered (-1: not known yet; body() asks). */
  bodySize: i32 = 0;
  flags: i32 = 0;
  /** This request's context (Step.newRequestContext), from its request callback to its response
   *  callback; null for a step without contexts, or in onResponse when its request phase did not
   *  run the step. */
  request: RequestContext | null = null;
  private _body: Uint8Array | null = null;
  private _op: string | null = null;
  private _db: string | null = null;
  private _coll: string | null = null;
  private _app: string | null = null;

  // (string fields are tested for null as pointers: `=== null` on a string calls String.__eq)

  /** Called by the SDK before each callback. op / db / collection / appName strings decoded in an earlier
   *  call are kept when the host says they are unchanged (CallFlag.SameOp etc.). */
  reset(phase: Phase, bodySize: i32, flags: i32): void {
    this.phase = phase; this.bodySize = bodySize; this.flags = flags;
    // Each reference store costs a GC write barrier: clear only what is set (tested as pointers:
    // `!== null` on a string calls String.__ne).
    if (changetype<usize>(this._body) != 0) this._body = null;
    if ((flags & CallFlag.SameOp) == 0 && changetype<usize>(this._op) != 0) this._op = null;
    if ((flags & CallFlag.SameDb) == 0 && changetype<usize>(this._db) != 0) this._db = null;
    if ((flags & CallFlag.SameCollection) == 0 && changetype<usize>(this._coll) != 0) this._coll = null;
    if ((flags & CallFlag.SameAppName) == 0 && changetype<usize>(this._app) != 0) this._app = null;
  }

  /** The command document (request phase, sequences folded in) or the reply document
   *  (response phase), copied into plugin memory on first use only. */
  body(): Uint8Array {
    let b = this._body;
    if (b !== null) return b;
    let size = this.bodySize;
    if (size < 0) size = proxy_get_body(this.phase, 0, 0);
    b = new Uint8Array(size);
    const got = proxy_get_body(this.phase, b.dataStart, size);
    if (got != size) { b = new Uint8Array(got); proxy_get_body(this.phase, b.dataStart, got); }
    this._body = b;
    return b;
  }

  /** Copies the body into `dst` when it fits, without allocating (for plugins that keep one
   *  buffer across calls); returns the body's size — larger than dst.length: nothing copied. */
  bodyInto(dst: Uint8Array): i32 {
    return proxy_get_body(this.phase, dst.dataStart, dst.length);
  }

  /** Offset of the first occurrence of `bytes` in the body (-1: absent), searched by the host
   *  without copying the body into the plugin. A cheap pre-check: a field name that is not in
   *  the bytes (`name` + NUL) is not in the document. */
  bodyFind(bytes: Uint8Array): i32 {
    return proxy_body_find(this.phase, bytes.dataStart, bytes.length);
  }

  /** Replace the command (request phase) or reply (response phase) document. */
  replaceBody(bson: Uint8Array): void {
    proxy_set_body(this.phase, bson.dataStart, bson.length);
    this._body = bson;
    this.bodySize = bson.length;
  }

  /** replaceBody for a document at [ptr, ptr+len) of plugin memory, e.g. a BsonWriter's
   *  `dataPtr` and `length`: the host copies it, the plugin does not. */
  replaceBodyAt(ptr: usize, len: i32): void {
    proxy_set_body(this.phase, ptr, len);
    this._body = null;
    this.bodySize = len;
  }

  /** Fail the request with a MongoDB error document ({ok:0, errmsg, code, codeName}). */
  reject(code: i32, codeName: string, message: string): Action {
    proxy_reject(code, strPtr(codeName), strLen(codeName), strPtr(message), strLen(message));
    return Action.Stop;
  }

  /** Answer without the upstream (request phase) or replace the reply (response phase). */
  replyLocal(bson: Uint8Array): Action {
    proxy_reply_local(bson.dataStart, bson.length);
    return Action.Stop;
  }

  /** replyLocal for a document at [ptr, ptr+len) of plugin memory (e.g. inside a reused buffer). */
  replyLocalAt(ptr: usize, len: i32): Action {
    proxy_reply_local(ptr, len);
    return Action.Stop;
  }

  setRoute(uri: string): void { proxy_set_route(strPtr(uri), strLen(uri)); }

  /** Record the identity an auth step established: the `user` property from now on, for later
   *  steps of this request and later requests on this connection. */
  setUser(name: string): void { proxy_set_user(strPtr(name), strLen(name)); }

  get bodyReplaced(): bool { return (this.flags & CallFlag.BodyReplaced) != 0; }
  get isLocalReply(): bool { return (this.flags & CallFlag.LocalReply) != 0; }

  get op(): string { if (changetype<usize>(this._op) == 0) this._op = property(Property.Op); return changetype<string>(this._op); }
  get db(): string { if (changetype<usize>(this._db) == 0) this._db = property(Property.Db); return changetype<string>(this._db); }
  get collection(): string { if (changetype<usize>(this._coll) == 0) this._coll = property(Property.Collection); return changetype<string>(this._coll); }
  get appName(): string { if (changetype<usize>(this._app) == 0) this._app = property(Property.AppName); return changetype<string>(this._app); }
  get clientAddress(): string { return property(Property.ClientAddress); }
  get user(): string { return property(Property.User); }
  get pipelineId(): string { return property(Property.PipelineId); }
  get route(): string { return property(Property.Route); }
  get requestId(): i64 { return <i64>proxy_get_number(Property.RequestId); }
  get connectionId(): i64 { return <i64>proxy_get_number(Property.ConnectionId); }
  /** Nanoseconds since the proxy read this request (no need to remember a start time). */
  get elapsedNs(): i64 { return <i64>proxy_get_number(Property.ElapsedNs); }
  /** Response phase: 1 when the reply has ok: 1 (or true), 0 when not, -1 when there is no reply.
   *  Read by the host without copying the reply into the plugin. */
  get replyOk(): i32 { return <i32>proxy_get_number(Property.ReplyOk); }
  /** Response phase: the reply's numeric `code` (0 when it has none). */
  get replyCode(): i32 { return <i32>proxy_get_number(Property.ReplyCode); }
}

const PROP_BUF_CHARS = 128;
const propBuf = new ArrayBuffer(PROP_BUF_CHARS << 1);

/** Read a string property (UTF-16 from the host). */
export function property(id: i32): string {
  const ptr = changetype<usize>(propBuf);
  const n = proxy_get_property(id, ptr, PROP_BUF_CHARS << 1);
  if (n < 0) return "";
  if (n <= (PROP_BUF_CHARS << 1)) return String.UTF16.decodeUnsafe(ptr, n);
  const big = new ArrayBuffer(n);
  proxy_get_property(id, changetype<usize>(big), n);
  return String.UTF16.decodeUnsafe(changetype<usize>(big), n);
}
