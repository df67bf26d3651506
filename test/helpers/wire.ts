// Test helpers for raw wire-protocol work: frame encoders written from the spec (independent of
// the proxy's own codec, so a codec bug cannot hide itself), a raw socket client, and a TCP tap
// that forwards bytes between a client and the proxy while counting opcodes in both directions.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { deserialize, serialize, type Document } from 'bson';

export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_COMPRESSED = 2012;
export const OP_MSG = 2013;

let nextRequestId = 1000;
export function requestId(): number {
  return ++nextRequestId;
}

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bitwise table.
const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();
export function crc32c(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export function header(length: number, reqId: number, responseTo: number, opCode: number): Buffer {
  const h = Buffer.alloc(16);
  h.writeInt32LE(length, 0);
  h.writeInt32LE(reqId, 4);
  h.writeInt32LE(responseTo, 8);
  h.writeInt32LE(opCode, 12);
  return h;
}

export interface MsgOptions {
  flags?: number;
  reqId?: number;
  /** Kind-1 document sequences. */
  sequences?: Array<{ id: string; docs: Document[] }>;
  /** Append a CRC-32C (sets flag bit 0); `badChecksum` writes a wrong one. */
  checksum?: boolean;
  badChecksum?: boolean;
}

/** An OP_MSG frame: one kind-0 body, optional kind-1 sequences, optional checksum. */
export function opMsg(body: Document | Buffer, o: MsgOptions = {}): Buffer {
  let flags = o.flags ?? 0;
  const withCrc = o.checksum === true || o.badChecksum === true;
  if (withCrc) flags |= 1;
  const parts: Buffer[] = [];
  const f = Buffer.alloc(4);
  f.writeUInt32LE(flags >>> 0, 0);
  parts.push(f);
  parts.push(Buffer.from([0]), Buffer.isBuffer(body) ? body : Buffer.from(serialize(body)));
  for (const s of o.sequences ?? []) {
    const id = Buffer.from(s.id + '\0', 'utf8');
    const docs = s.docs.map((d) => Buffer.from(serialize(d)));
    const size = 4 + id.length + docs.reduce((n, d) => n + d.length, 0);
    const sz = Buffer.alloc(4);
    sz.writeInt32LE(size, 0);
    parts.push(Buffer.from([1]), sz, id, ...docs);
  }
  const payload = Buffer.concat(parts);
  const len = 16 + payload.length + (withCrc ? 4 : 0);
  const frame = Buffer.concat([header(len, o.reqId ?? requestId(), 0, OP_MSG), payload, withCrc ? Buffer.alloc(4) : Buffer.alloc(0)]);
  if (withCrc) {
    let crc = crc32c(frame.subarray(0, len - 4));
    if (o.badChecksum === true) crc = (crc ^ 0xdeadbeef) >>> 0;
    frame.writeUInt32LE(crc, len - 4);
  }
  return frame;
}

/** A legacy OP_QUERY frame (`query` a document, or its BSON bytes as they are). */
export function opQuery(fullCollectionName: string, query: Document | Buffer, o: { reqId?: number; numberToReturn?: number } = {}): Buffer {
  const flags = Buffer.alloc(4);
  const ns = Buffer.from(fullCollectionName + '\0', 'utf8');
  const nums = Buffer.alloc(8);
  nums.writeInt32LE(0, 0); // numberToSkip
  nums.writeInt32LE(o.numberToReturn ?? -1, 4);
  const q = Buffer.isBuffer(query) ? query : Buffer.from(serialize(query));
  const payload = Buffer.concat([flags, ns, nums, q]);
  return Buffer.concat([header(16 + payload.length, o.reqId ?? requestId(), 0, OP_QUERY), payload]);
}

export interface Frame {
  length: number;
  requestId: number;
  responseTo: number;
  opCode: number;
  raw: Buffer;
}

/** Parses a reply frame: OP_MSG → its body; OP_REPLY → flags and documents. */
export function decodeReply(f: Frame): { opCode: number; flags: number; body?: Document; docs?: Document[] } {
  const b = f.raw;
  if (f.opCode === OP_MSG) {
    const flags = b.readUInt32LE(16);
    if (b[20] !== 0) throw new Error(`reply's first section has kind ${b[20]}`);
    const n = b.readInt32LE(21);
    return { opCode: OP_MSG, flags, body: deserialize(b.subarray(21, 21 + n)) };
  }
  if (f.opCode === OP_REPLY) {
    const flags = b.readInt32LE(16);
    const count = b.readInt32LE(32);
    const docs: Document[] = [];
    let off = 36;
    for (let i = 0; i < count; i++) {
      const n = b.readInt32LE(off);
      docs.push(deserialize(b.subarray(off, off + n)));
      off += n;
    }
    return { opCode: OP_REPLY, flags, docs };
  }
  throw new Error(`unexpected reply opcode ${f.opCode}`);
}

/** Splits a byte stream into frames (by the length prefix only: no validation). */
class Splitter {
  private buf: Buffer = Buffer.alloc(0);
  constructor(private readonly onFrame: (f: Frame) => void) {}
  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    while (this.buf.length >= 4) {
      const len = this.buf.readInt32LE(0);
      if (len < 16 || this.buf.length < len) {
        if (len < 16) this.buf = Buffer.alloc(0); // not a stream we can follow any more
        return;
      }
      const raw = this.buf.subarray(0, len);
      this.buf = this.buf.subarray(len);
      this.onFrame({ length: len, requestId: raw.readInt32LE(4), responseTo: raw.readInt32LE(8), opCode: raw.readInt32LE(12), raw });
    }
  }
}

/** A raw TCP client: write bytes, await the next frame or the close, each with a timeout. */
export class RawClient {
  readonly socket: Socket;
  private readonly frames: Frame[] = [];
  private waiter: ((f: Frame | null) => void) | null = null;
  closed = false;
  readonly closedPromise: Promise<void>;

  private constructor(socket: Socket) {
    this.socket = socket;
    const sp = new Splitter((f) => {
      if (this.waiter !== null) {
        const w = this.waiter;
        this.waiter = null;
        w(f);
      } else this.frames.push(f);
    });
    socket.on('data', (c: Buffer) => sp.push(c));
    this.closedPromise = new Promise((resolve) => {
      const done = () => {
        this.closed = true;
        if (this.waiter !== null) {
          const w = this.waiter;
          this.waiter = null;
          w(null);
        }
        resolve();
      };
      socket.on('close', done);
      socket.on('error', () => {});
    });
  }

  static connect(port: number, host = '127.0.0.1'): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const s = connect({ host, port }, () => {
        s.off('error', reject);
        resolve(new RawClient(s));
      });
      s.once('error', reject);
    });
  }

  write(b: Buffer): void {
    this.socket.write(b);
  }

  /** The next frame, or null when the connection closed first; rejects after `ms`. */
  next(ms = 5000): Promise<Frame | null> {
    if (this.frames.length > 0) return Promise.resolve(this.frames.shift()!);
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        reject(new Error(`no frame and no close within ${ms} ms`));
      }, ms);
      this.waiter = (f) => {
        clearTimeout(timer);
        resolve(f);
      };
    });
  }

  /** Sends a frame and returns the decoded reply (throws if the connection closed instead). */
  async roundTrip(frame: Buffer, ms = 5000): Promise<ReturnType<typeof decodeReply> & { frame: Frame }> {
    this.write(frame);
    const f = await this.next(ms);
    if (f === null) throw new Error('connection closed instead of replying');
    return { ...decodeReply(f), frame: f };
  }

  /** A client hello over OP_MSG (needed by nothing in the proxy, but what drivers do first). */
  async hello(extra: Document = {}): Promise<Document> {
    const r = await this.roundTrip(opMsg({ hello: 1, $db: 'admin', ...extra }));
    return r.body!;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/**
 * A TCP forwarder between clients and a target, counting frames per opcode in each direction
 * (it parses only headers; bytes pass through unchanged). For OP_COMPRESSED it also records the
 * compressor id (byte 24 of the frame).
 */
export class TcpTap {
  readonly toServer = new Map<number, number>();
  readonly toClient = new Map<number, number>();
  /** compressorId → count, both directions. */
  readonly compressors = new Map<number, number>();
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  /** While non-null, bytes towards the client are kept here (see hold/release). */
  private held: Array<[Socket, Buffer]> | null = null;
  port = 0;

  constructor(private readonly targetPort: number, private readonly targetHost = '127.0.0.1') {
    this.server = createServer((client) => {
      const upstream = connect({ host: this.targetHost, port: this.targetPort });
      this.sockets.add(client);
      this.sockets.add(upstream);
      const count = (m: Map<number, number>) => new Splitter((f) => {
        m.set(f.opCode, (m.get(f.opCode) ?? 0) + 1);
        if (f.opCode === OP_COMPRESSED && f.raw.length > 24) this.compressors.set(f.raw[24], (this.compressors.get(f.raw[24]) ?? 0) + 1);
      });
      const up = count(this.toServer);
      const down = count(this.toClient);
      client.on('data', (c: Buffer) => { up.push(c); upstream.write(c); });
      upstream.on('data', (c: Buffer) => {
        down.push(c);
        if (this.held !== null) this.held.push([client, c]);
        else client.write(c);
      });
      const end = () => { client.destroy(); upstream.destroy(); this.sockets.delete(client); this.sockets.delete(upstream); };
      client.on('close', end);
      upstream.on('close', end);
      client.on('error', end);
      upstream.on('error', end);
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    const a = this.server.address();
    this.port = typeof a === 'object' && a !== null ? a.port : 0;
    return `mongodb://127.0.0.1:${this.port}/`;
  }

  /** Stops passing bytes back towards clients (a slow server, as seen from the client side). */
  hold(): void {
    if (this.held === null) this.held = [];
  }

  /** Delivers everything held and passes bytes through again. */
  release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const [s, c] of held) if (!s.destroyed) s.write(c);
  }

  count(dir: 'toServer' | 'toClient', op: number): number {
    return this[dir].get(op) ?? 0;
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
