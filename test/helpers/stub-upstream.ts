// A scripted MongoDB server for tests of what a broken or hostile upstream does to the proxy: it
// answers the handshake's hello itself (the reply's fields can be overridden) and hands every other
// OP_MSG command to the test's `onCommand`, which writes whatever bytes it likes (or nothing).
// Frames are split by their length prefix only; the body is read at the first section.
import { createServer, type Server, type Socket } from 'node:net';
import { deserialize, serialize, type Document } from 'bson';
import { OP_MSG, header } from './wire.ts';

export interface StubRequest {
  readonly socket: Socket;
  readonly requestId: number;
  readonly flags: number;
  readonly cmd: Document;
  /** The command's name (its first field). */
  readonly op: string;
}

let nextStubRequestId = 500_000;

/** An OP_MSG reply frame: `body` a document or raw bytes, `flags` as given. */
export function stubReply(responseTo: number, body: Document | Buffer, flags = 0, requestId = ++nextStubRequestId): Buffer {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(serialize(body));
  const f = Buffer.alloc(5);
  f.writeUInt32LE(flags >>> 0, 0);
  f[4] = 0;
  return Buffer.concat([header(16 + 5 + b.length, requestId, responseTo, OP_MSG), f, b]);
}

export class StubUpstream {
  private readonly server: Server;
  readonly sockets = new Set<Socket>();
  port = 0;
  /** Fields laid over the default hello reply. */
  hello: Document = {};
  /** Every command but hello; the default answers `{ ok: 1 }`. */
  onCommand: (r: StubRequest) => void = (r) => r.socket.write(stubReply(r.requestId, { ok: 1 }));
  /** Connections accepted so far. */
  accepted = 0;

  constructor() {
    this.server = createServer((s) => {
      this.accepted++;
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => {});
      let buf = Buffer.alloc(0);
      s.on('data', (c: Buffer) => {
        buf = Buffer.concat([buf, c]);
        while (buf.length >= 4 && buf.length >= buf.readInt32LE(0)) {
          const frame = buf.subarray(0, buf.readInt32LE(0));
          buf = buf.subarray(frame.length);
          this.frame(s, frame);
        }
      });
    });
  }

  private frame(s: Socket, f: Buffer): void {
    if (f.readInt32LE(12) !== OP_MSG) { s.destroy(); return; }
    const flags = f.readUInt32LE(16);
    const cmd = deserialize(f.subarray(21, 21 + f.readInt32LE(21)));
    const op = Object.keys(cmd)[0] ?? '';
    const requestId = f.readInt32LE(4);
    if (op === 'hello' || op === 'isMaster' || op === 'ismaster') {
      s.write(stubReply(requestId, {
        isWritablePrimary: true, msg: 'isdbgrid', maxBsonObjectSize: 16777216, maxMessageSizeBytes: 48000000, maxWriteBatchSize: 100000,
        localTime: new Date(), logicalSessionTimeoutMinutes: 30, minWireVersion: 0, maxWireVersion: 17, ok: 1, ...this.hello,
      }));
      return;
    }
    this.onCommand({ socket: s, requestId, flags, cmd, op });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    const a = this.server.address();
    this.port = typeof a === 'object' && a !== null ? a.port : 0;
    return `mongodb://127.0.0.1:${this.port}/`;
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
