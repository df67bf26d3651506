// Writes a client connection's replies: encodes them the way the request came (OP_MSG, or OP_REPLY
// for a legacy OP_QUERY; compressed with the request's compressor when it was compressed), and
// applies backpressure — undici's and Node streams' boolean kind. After each reply it looks at the
// bytes the socket still holds for the client; past clients.max_pending_reply_bytes it is
// `blocked` and the connection stops reading and starts no further request until the socket
// drains. A client that pipelines requests and never reads thus costs at most that bound plus one
// reply. Upstream connections need no separate pause: one carries one request of one client at a
// time, and no request is sent upstream for a client that cannot take its reply.
import type { Socket } from 'node:net';
import {
  compressFrame, encodeOpMsg, encodeOpReply, parseOpMsg, retargetOpMsg, REPLY_QUERY_FAILURE, OP_MSG, OP_QUERY,
  HEADER_SIZE, MSG_MORE_TO_COME,
} from '../wire/index.ts';
import { newRequestId } from '../upstream/index.ts';

export const enum ReplyKind { Msg = 0, LegacyQuery = 1 }

export interface ReplyWriterOwner {
  /** The socket drained below the bound after being blocked: reading and requests may resume. */
  onWritable(): void;
}

export class ReplyWriter {
  private readonly socket: Socket;
  private readonly maxPending: number;
  private readonly zlibLevel: number;
  private readonly stats: { backpressurePauses: number };
  private readonly owner: ReplyWriterOwner;
  /** The client has more unread reply bytes than the bound: wait for 'drain'. */
  blocked = false;

  // Where the reply to the request in flight goes (set per request).
  kind: ReplyKind = ReplyKind.Msg;
  requestId = 0;
  /** Compressor id for the reply; -1 = uncompressed. */
  compressor = -1;
  /** False for a moreToCome request: nothing is written back. */
  expectReply = true;

  constructor(socket: Socket, maxPending: number, zlibLevel: number, stats: { backpressurePauses: number }, owner: ReplyWriterOwner) {
    this.socket = socket;
    this.maxPending = maxPending;
    this.zlibLevel = zlibLevel;
    this.stats = stats;
    this.owner = owner;
    socket.on('drain', () => this.onDrain());
  }

  /** Sets where the next replies go. */
  target(kind: ReplyKind, requestId: number, compressor: number, expectReply: boolean): void {
    this.kind = kind;
    this.requestId = requestId;
    this.compressor = compressor;
    this.expectReply = expectReply;
  }

  /**
   * For a request answered without being parsed (`frame`, opcode `op`, decompressed; refusals): a
   * legacy OP_QUERY gets an OP_REPLY, and an OP_MSG's moreToCome flag says whether any reply is expected.
   */
  targetUnparsed(frame: Buffer, op: number): void {
    if (op === OP_QUERY) this.target(ReplyKind.LegacyQuery, this.requestId, -1, true);
    else if (op === OP_MSG) this.expectReply = frame.length < HEADER_SIZE + 4 || (frame.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) === 0;
  }

  /** Answers the request in flight with the reply document `body`. */
  body(body: Uint8Array): void {
    if (!this.expectReply) return;
    if (this.kind === ReplyKind.LegacyQuery) {
      this.write(encodeOpReply(newRequestId(), this.requestId, 0, [body]));
      return;
    }
    let out = encodeOpMsg(newRequestId(), this.requestId, 0, body);
    if (this.compressor > 0) out = compressFrame(out, this.compressor, this.zlibLevel);
    this.write(out);
  }

  /**
   * Answers with an error document (OP_REPLY with QueryFailure for a legacy request, which always
   * expects a reply). False when nothing was written: the request was moreToCome.
   */
  error(doc: Buffer): boolean {
    if (this.kind === ReplyKind.LegacyQuery) {
      this.write(encodeOpReply(newRequestId(), this.requestId, REPLY_QUERY_FAILURE, [doc]));
      return true;
    }
    if (!this.expectReply) return false;
    this.write(encodeOpMsg(newRequestId(), this.requestId, 0, doc));
    return true;
  }

  /** Forwards the upstream's reply frame: header retargeted in place, no re-encoding (or translated to OP_REPLY). */
  upstreamFrame(frame: Buffer): void {
    if (this.kind === ReplyKind.LegacyQuery) {
      this.write(encodeOpReply(newRequestId(), this.requestId, 0, [parseOpMsg(frame).body]));
      return;
    }
    let out = retargetOpMsg(frame, newRequestId(), this.requestId, 0);
    if (this.compressor > 0) out = compressFrame(out, this.compressor, this.zlibLevel);
    this.write(out);
  }

  /** Every reply goes through here: written whole, then the backpressure check. */
  write(out: Buffer): void {
    const socket = this.socket;
    socket.write(out);
    if (!this.blocked && socket.writableLength > this.maxPending) {
      this.blocked = true;
      this.stats.backpressurePauses++;
    }
  }

  private onDrain(): void {
    if (!this.blocked) return;
    this.blocked = false;
    this.owner.onWritable();
  }
}
