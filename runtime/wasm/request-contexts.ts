// Per-request contexts of one plugin instance (proxy-wasm's HTTP context): a number the plugin
// keeps one request's state under, from its request callback to its response callback. Only for
// a step that asked for them while configuring (proxy_request_contexts) and acts in both phases;
// every other step pays nothing.
//
// A request may end without this step's response callback: a later step rejected it, no reply
// was due (moreToCome), the upstream call failed, the connection closed. The host learns of that
// without a hook in the pipeline, from the connection: requests on one client connection run one
// after another, so a connection's next request ends its previous one; when all `max` are open
// (connections that went away leave theirs), one is ended to make room, round robin. Ending a
// context other than by the response callback calls the plugin's proxy_on_request_done. A trap
// discards the instance, and its contexts with it.
//
// Hot path: a connection's entry in `byConn` is overwritten, never deleted per request (a Map
// delete + set per request measured ~140 ns: the deleted entries pile up until V8 rehashes);
// entries of connections with no open context are swept in bulk once they outnumber the open
// contexts, so the map stays proportional to them.
import type { HostExchange } from './host-exchange.ts';

/** Stale connection entries tolerated beyond twice the open contexts before a sweep. */
const SWEEP_SLACK = 64;

export class RequestContexts {
  readonly max: number;
  /** The serial of the request each context number belongs to (0: free); grows up to max. A
   *  connection reuses its exchange object for its next request, so requests are told apart by
   *  serial, not by object. */
  private readonly exOf: number[];
  /** The connection id of each context number's last request. */
  private readonly connOf: number[];
  /** Connection id → its last context number (open only while exOf/connOf still say so). */
  private readonly byConn: Map<number, number>;
  private readonly free: number[];
  private open_: number;
  /** Next context number to end when all are taken. */
  private cursor: number;
  /** Ends a context whose request got no response callback (calls into the plugin). */
  private readonly done: (context: number) => void;

  constructor(max: number, done: (context: number) => void) {
    this.max = max;
    this.exOf = [];
    this.connOf = [];
    this.byConn = new Map();
    this.free = [];
    this.open_ = 0;
    this.cursor = 0;
    this.done = done;
  }

  /** Open contexts. */
  get size(): number {
    return this.open_;
  }

  /** Request phase: the context of `ex` — a fresh one, after ending the connection's previous
   *  request's (and, when all are taken, another one). */
  open(ex: HostExchange): number {
    const conn = ex.conn.id;
    const prev = this.byConn.get(conn);
    if (prev !== undefined && this.connOf[prev] === conn) {
      const owner = this.exOf[prev]!;
      if (owner === ex.serial) return prev; // the step runs twice in this phase
      if (owner !== 0) this.end(prev);
    }
    if (this.free.length === 0 && this.exOf.length >= this.max) this.end(this.victim());
    let context: number;
    if (this.free.length > 0) context = this.free.pop()!;
    else {
      context = this.exOf.push(0) - 1;
      this.connOf.push(-1);
    }
    this.exOf[context] = ex.serial;
    this.connOf[context] = conn;
    this.open_++;
    if (prev === undefined && this.byConn.size > 2 * this.open_ + SWEEP_SLACK) this.sweep();
    this.byConn.set(conn, context);
    return context;
  }

  /** Response phase: the context `ex` opened at its request phase (release() it after the
   *  callback), or -1 when it has none. */
  take(ex: HostExchange): number {
    const context = this.byConn.get(ex.conn.id);
    if (context === undefined || this.exOf[context] !== ex.serial) return -1;
    return context;
  }

  /** Frees a context take() returned, once the response callback is over. */
  release(context: number): void {
    this.exOf[context] = 0;
    this.free.push(context);
    this.open_--;
  }

  private end(context: number): void {
    this.release(context);
    this.done(context);
  }

  /** An open context to end for room (all are open when this is called). */
  private victim(): number {
    const n = this.exOf.length;
    for (;;) {
      const k = this.cursor;
      this.cursor = k + 1 === n ? 0 : k + 1;
      if (this.exOf[k] !== 0) return k;
    }
  }

  /** Drops the entries of connections without an open context. */
  private sweep(): void {
    for (const [conn, k] of this.byConn) {
      if (this.connOf[k] !== conn || this.exOf[k] === 0) this.byConn.delete(conn);
    }
  }
}
