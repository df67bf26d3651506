// One TCP connection to the upstream. It carries one exchange at a time (the pool leases it out),
// frames replies with the shared Framer, and reports through a handler object rather than
// per-request closures.
import { connect, isIP, type LookupFunction, type NetConnectOpts, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import type { UpstreamTls } from './uri.ts';
import { Binary, deserialize, serialize, type Document } from 'bson';
import { ScramClient, type Credentials } from './scram.ts';
import type { UpstreamPool } from './pool.ts';
import { VERSION } from '../version.ts';
import {
  Framer, type FrameSink, type WireError, encodeOpMsg, parseOpMsg, decompressFrame, checkDocument, OP_MSG, OP_COMPRESSED,
  MSG_MORE_TO_COME, SECTION_BODY, HEADER_SIZE, MAX_MESSAGE_SIZE,
} from '../wire/index.ts';
import { errorReason, formatHostPort } from '../config/index.ts';

export interface ReplyHandler {
  /** A reply frame (OP_MSG, decompressed) answering the request sent with `send`. */
  onUpstreamReply(frame: Buffer, conn: UpstreamConnection): void;
  /** The connection failed while a request was outstanding; `sent` tells whether bytes were written. */
  onUpstreamError(err: Error, conn: UpstreamConnection, sent: boolean): void;
}

export interface UpstreamInfo {
  maxWireVersion: number;
  minWireVersion: number;
  maxBsonObjectSize: number;
  maxMessageSizeBytes: number;
  maxWriteBatchSize: number;
  logicalSessionTimeoutMinutes: number | null;
}

/** The smallest maxBsonObjectSize / maxMessageSizeBytes taken from an upstream (mongod's are 16 MiB and 48,000,000). */
export const MIN_UPSTREAM_SIZE_LIMIT = 16 * 1024;
const INT32_MAX = 2 ** 31 - 1;

/** `v` when it is an integer in [min, max], else `fallback`. */
function intIn(v: unknown, min: number, max: number, fallback: number): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : fallback;
}

/**
 * The limits the proxy advertises, from an upstream's hello reply. The proxy relays them to every
 * client and enforces them itself, so a value that is not a sane integer is not trusted: a size
 * limit of 0 or below 16 KiB, negative, not a number, or above what the proxy frames (48,000,000
 * bytes) takes the default (a maxMessageSizeBytes of 0 made every request a BadValue, one above
 * 48,000,000 let drivers send messages the proxy's framer refuses by closing the connection); so
 * does a batch size below 1 or above 2^31 − 1; a wire version that is not an int32 counts as 0, and
 * a session timeout that is not one as absent.
 */
export function infoFromHello(reply: Document): UpstreamInfo {
  const maxMessageSizeBytes = intIn(reply.maxMessageSizeBytes, MIN_UPSTREAM_SIZE_LIMIT, MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE);
  const sessionTimeout = intIn(reply.logicalSessionTimeoutMinutes, 0, INT32_MAX, -1);
  return {
    maxWireVersion: intIn(reply.maxWireVersion, 0, INT32_MAX, 0),
    minWireVersion: intIn(reply.minWireVersion, 0, INT32_MAX, 0),
    maxBsonObjectSize: intIn(reply.maxBsonObjectSize, MIN_UPSTREAM_SIZE_LIMIT, maxMessageSizeBytes, Math.min(16777216, maxMessageSizeBytes)),
    maxMessageSizeBytes,
    maxWriteBatchSize: intIn(reply.maxWriteBatchSize, 1, INT32_MAX, 100000),
    logicalSessionTimeoutMinutes: sessionTimeout < 0 ? null : sessionTimeout,
  };
}

/**
 * TCP keepalive on every upstream socket (pooled and monitoring), after this long without traffic:
 * a peer that vanished (a network partition, a host powered off) is found by the kernel's probes
 * instead of leaving an idle socket open for ever. An exchange in progress is bounded otherwise: by
 * the server monitor of a multi-host upstream (a failed check clears the server's pool), and by
 * upstream.request_timeout_ms (docs/operations.md, "A silent server").
 */
export const UPSTREAM_KEEPALIVE_MS = 30_000;

let nextRequestId = 1;
export function newRequestId(): number {
  nextRequestId = (nextRequestId + 1) & 0x7fffffff;
  if (nextRequestId === 0) nextRequestId = 1;
  return nextRequestId;
}

/** tls.connect options for one upstream host (only the keys that are set: an explicit undefined
 *  would replace Node's defaults, checkServerIdentity among them). */
function tlsOptions(host: string, port: number, tls: UpstreamTls, lookup: LookupFunction | null): ConnectionOptions {
  const o: ConnectionOptions = { host, port, rejectUnauthorized: !tls.allowInvalidCertificates };
  if (lookup !== null) o.lookup = lookup;
  if (isIP(host) === 0) o.servername = host; // SNI carries names only
  if (tls.ca !== null) o.ca = tls.ca;
  if (tls.certificateKey !== null) {
    o.cert = tls.certificateKey;
    o.key = tls.certificateKey;
    if (tls.passphrase !== undefined) o.passphrase = tls.passphrase;
  }
  if (tls.allowInvalidHostnames) o.checkServerIdentity = () => undefined;
  return o;
}

export class UpstreamConnection implements FrameSink {
  readonly id: number;
  readonly host: string;
  readonly port: number;
  private readonly socket: Socket;
  private readonly framer: Framer;
  private handler: ReplyHandler | null = null;
  private expected = 0;
  /** When the connection was last returned to the pool (monotonic ms). */
  idleSince = 0;
  alive = true;
  /** Its host left the upstream's host list: closed when next released instead of pooled. */
  retired = false;
  info: UpstreamInfo | null = null;
  /** The handshake's hello reply (server monitors read the topology fields from it). */
  hello: Document | null = null;
  /** The pool that owns the connection (null for a monitor's connection). */
  pool: UpstreamPool | null = null;
  /** The pool's generation when the connection was opened (a cleared pool closes older ones on release). */
  generation = 0;
  private onClosed: ((conn: UpstreamConnection) => void) | null;

  private constructor(id: number, host: string, port: number, socket: Socket) {
    this.id = id;
    this.host = host;
    this.port = port;
    this.socket = socket;
    this.framer = new Framer(this);
    this.onClosed = null;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, UPSTREAM_KEEPALIVE_MS);
    socket.on('data', (chunk: Buffer) => {
      // Bytes while no reply is awaited (an idle pooled connection, after a fire-and-forget write)
      // were asked for by nobody: framed, they would swallow the reply to the next request sent here.
      if (this.handler === null) this.fail(new Error(`unsolicited data from upstream (${chunk.length} bytes while no reply was awaited)`));
      else this.framer.push(chunk);
    });
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('upstream connection closed')));
  }

  /** Opens a connection and runs the hello handshake; rejects after `timeoutMs`. */
  static open(id: number, host: string, port: number, timeoutMs: number, onClosed: (conn: UpstreamConnection) => void,
    credentials: Credentials | null = null, tls: UpstreamTls | null = null, lookup: LookupFunction | null = null): Promise<UpstreamConnection> {
    return new Promise((resolve, reject) => {
      const plain: NetConnectOpts = { host, port };
      if (lookup !== null) plain.lookup = lookup;
      const socket = tls === null ? connect(plain) : tlsConnect(tlsOptions(host, port, tls, lookup));
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        socket.destroy();
        reject(new Error(`connect to ${formatHostPort(host, port)} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      const early = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(new Error(`connect to ${formatHostPort(host, port)} failed: ${tls === null ? '' : 'TLS: '}${errorReason(err)}`, { cause: err }));
      };
      socket.once('error', early);
      socket.once(tls === null ? 'connect' : 'secureConnect', () => {
        socket.off('error', early);
        // A connection that never reached its owner must not report its close (the pool already
        // accounts for the failed open): `onClosed` is set only once the handshake succeeded, so
        // an upstream that hangs up mid-handshake is reported once, as the failed open.
        const conn = new UpstreamConnection(id, host, port, socket);
        const discard = () => { conn.onClosed = null; conn.destroy(); };
        conn.handshake(credentials).then((info) => {
          if (settled) { discard(); return; }
          settled = true;
          clearTimeout(timer);
          conn.info = info;
          if (!conn.alive) {
            reject(new Error(`connection to ${formatHostPort(host, port)} closed right after its handshake`));
            return;
          }
          conn.onClosed = onClosed;
          resolve(conn);
        }, (err: Error) => {
          discard();
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          reject(err);
        });
      });
    });
  }

  /** hello, then (with credentials) SCRAM authentication: the connection is usable only after both. */
  private async handshake(credentials: Credentials | null): Promise<UpstreamInfo> {
    const reply = await this.command({
      hello: 1, $db: 'admin',
      client: { driver: { name: 'pipeline-proxy', version: VERSION }, os: { type: process.platform }, platform: `Node.js ${process.version}` },
    });
    if (reply.ok !== 1) throw new Error(`upstream hello failed: ${reply.errmsg}`);
    this.hello = reply;
    if (credentials !== null) await this.authenticate(credentials);
    return infoFromHello(reply);
  }

  private async authenticate(c: Credentials): Promise<void> {
    const scram = new ScramClient(c);
    const fail = (why: string) => new Error(`upstream authentication of "${c.username}" (${c.mechanism}, authSource ${c.source}) failed: ${why}`);
    let r = await this.command({ saslStart: 1, mechanism: c.mechanism, payload: new Binary(scram.first()), autoAuthorize: 1,
      options: { skipEmptyExchange: true }, $db: c.source });
    if (r.ok !== 1) throw fail(String(r.errmsg));
    const conversationId = r.conversationId;
    let clientFinal: Buffer;
    try {
      clientFinal = scram.next(Buffer.from((r.payload as Binary).buffer));
    } catch (err) {
      throw fail((err as Error).message);
    }
    r = await this.command({ saslContinue: 1, conversationId, payload: new Binary(clientFinal), $db: c.source });
    if (r.ok !== 1) throw fail(String(r.errmsg));
    try {
      scram.finish(Buffer.from((r.payload as Binary).buffer));
    } catch (err) {
      throw fail((err as Error).message);
    }
    // Servers that ignore skipEmptyExchange want one more, empty round.
    if (r.done !== true) {
      r = await this.command({ saslContinue: 1, conversationId, payload: new Binary(Buffer.alloc(0)), $db: c.source });
      if (r.ok !== 1 || r.done !== true) throw fail(String(r.errmsg ?? 'conversation did not complete'));
    }
  }

  /** One command round trip, decoded (the handshake and server monitors; not the request path). */
  command(doc: Document): Promise<Document> {
    return new Promise((resolve, reject) => {
      this.send(encodeOpMsg(newRequestId(), 0, 0, serialize(doc)), {
        onUpstreamReply(frame) {
          try {
            resolve(deserialize(parseOpMsg(frame).body) as Document);
          } catch (err) {
            reject(err as Error);
          }
        },
        onUpstreamError(err) { reject(err); },
      });
    });
  }

  /**
   * Writes a request frame. When `expectReply` is false (moreToCome), nothing is awaited. The frame's
   * requestID must already be set; replies are matched on responseTo.
   */
  send(frame: Buffer, handler: ReplyHandler, expectReply = true): void {
    // The part of a frame that came after the last reply, in the same read: the stream is out of step.
    if (this.alive && this.framer.buffered > 0) this.fail(new Error(`unsolicited data from upstream (${this.framer.buffered} bytes after a reply)`));
    if (!this.alive) {
      handler.onUpstreamError(new Error('upstream connection is closed'), this, false);
      return;
    }
    if (expectReply) {
      this.handler = handler;
      this.expected = frame.readInt32LE(4);
    }
    this.socket.write(frame);
  }

  onFrame(frame: Buffer): void {
    let f = frame;
    let op = f.readInt32LE(12);
    if (op === OP_COMPRESSED) {
      try {
        f = decompressFrame(f).frame;
        op = f.readInt32LE(12);
      } catch (err) {
        this.fail(err as Error);
        return;
      }
    }
    const h = this.handler;
    if (h === null || f.readInt32LE(8) !== this.expected || op !== OP_MSG) {
      this.fail(new Error(`unexpected frame from upstream (opcode ${op}, responseTo ${f.readInt32LE(8)})`));
      return;
    }
    // Clients decode the body section, and the reply path peeks into it: a reply whose body
    // document is cut short (its length runs past the message, no terminator) is not forwarded.
    // Only lengths and terminators are checked, not contents; the usual reply (no flags, one body
    // section filling the message) costs a few byte reads, any other layout gets the full walk of
    // parseOpMsg: flags, checksum, every section (bytes after the body, or a section of an unknown
    // kind, were relayed unchecked when only the body was looked at).
    try {
      if (f.length < HEADER_SIZE + 10 || f.readUInt32LE(HEADER_SIZE) !== 0 || f[HEADER_SIZE + 4] !== SECTION_BODY ||
        checkDocument(f, HEADER_SIZE + 5, f.length) !== f.length - HEADER_SIZE - 5) parseOpMsg(f);
    } catch (err) {
      this.fail(new Error(`malformed reply from upstream: ${(err as Error).message}`));
      return;
    }
    // The proxy never asks for exhaust (it clears exhaustAllowed on every request it forwards), so
    // a reply with moreToCome is one the upstream was not asked for: relayed, it would tell the
    // client to wait for more replies, and the frames still to come would reach whatever request
    // is sent next on this connection (or on another connection of the same call). The
    // connection's stream is no longer in step with its requests: it is dropped.
    if ((f.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) !== 0) {
      this.fail(new Error(`unexpected frame from upstream (a reply with moreToCome, responseTo ${f.readInt32LE(8)}; the proxy asked for no exhaust)`));
      return;
    }
    this.handler = null;
    h.onUpstreamReply(f, this);
  }

  onFrameError(err: WireError): void {
    this.fail(err);
  }

  get busy(): boolean {
    return this.handler !== null;
  }

  private fail(err: Error): void {
    if (!this.alive) return;
    this.alive = false;
    this.framer.fail();
    this.socket.destroy();
    const h = this.handler;
    this.handler = null;
    if (h !== null) h.onUpstreamError(err, this, true);
    const cb = this.onClosed;
    this.onClosed = null;
    if (cb !== null) cb(this);
  }

  /** Closes the connection; a request outstanding on it fails with `reason`. */
  destroy(reason = 'upstream connection destroyed'): void {
    this.fail(new Error(reason));
  }
}
