// Legacy OP_QUERY (2004) and OP_REPLY (1). Drivers still send their first handshake as OP_QUERY on
// `admin.$cmd`; nothing else legacy is served.
// OP_QUERY: header, int32 flags, cstring fullCollectionName, int32 numberToSkip,
//           int32 numberToReturn, document query, [document returnFieldsSelector]
// OP_REPLY: header, int32 responseFlags, int64 cursorID, int32 startingFrom, int32 numberReturned, documents

import { HEADER_SIZE, OP_REPLY } from './constants.ts';
import { checkDocument, skipCString } from './bson-peek.ts';
import { WireError } from './errors.ts';

export class OpQuery {
  readonly requestId: number;
  readonly flags: number;
  readonly fullCollectionName: string;
  readonly numberToSkip: number;
  readonly numberToReturn: number;
  readonly query: Buffer;
  readonly fields: Buffer | null;
  constructor(requestId: number, flags: number, ns: string, skip: number, ret: number, query: Buffer, fields: Buffer | null) {
    this.requestId = requestId;
    this.flags = flags;
    this.fullCollectionName = ns;
    this.numberToSkip = skip;
    this.numberToReturn = ret;
    this.query = query;
    this.fields = fields;
  }

  /** True for commands (`<db>.$cmd`). */
  get isCommand(): boolean {
    return this.fullCollectionName.endsWith('.$cmd');
  }

  get db(): string {
    const dot = this.fullCollectionName.indexOf('.');
    return dot < 0 ? this.fullCollectionName : this.fullCollectionName.slice(0, dot);
  }
}

export function parseOpQuery(frame: Buffer): OpQuery {
  const end = frame.length;
  if (end < HEADER_SIZE + 4 + 1 + 8 + 5) throw new WireError('PROXY_ERR_BAD_SECTION', 'OP_QUERY too short', true);
  const flags = frame.readInt32LE(HEADER_SIZE);
  const nsStart = HEADER_SIZE + 4;
  const nsEnd = skipCString(frame, nsStart, end);
  const ns = frame.toString('utf8', nsStart, nsEnd - 1);
  if (nsEnd + 8 > end) throw new WireError('PROXY_ERR_BAD_SECTION', 'OP_QUERY truncated after the namespace', true);
  const skip = frame.readInt32LE(nsEnd);
  const ret = frame.readInt32LE(nsEnd + 4);
  let off = nsEnd + 8;
  const qlen = checkDocument(frame, off, end);
  const query = frame.subarray(off, off + qlen);
  off += qlen;
  let fields: Buffer | null = null;
  if (off < end) {
    const flen = checkDocument(frame, off, end);
    fields = frame.subarray(off, off + flen);
    off += flen;
  }
  if (off !== end) throw new WireError('PROXY_ERR_BAD_SECTION', 'OP_QUERY has trailing bytes', true);
  return new OpQuery(frame.readInt32LE(4), flags, ns, skip, ret, query, fields);
}

export function encodeOpReply(requestId: number, responseTo: number, flags: number, docs: readonly Uint8Array[], cursorId = 0n): Buffer {
  let size = HEADER_SIZE + 20;
  for (const d of docs) size += d.length;
  const out = Buffer.allocUnsafe(size);
  out.writeInt32LE(size, 0);
  out.writeInt32LE(requestId, 4);
  out.writeInt32LE(responseTo, 8);
  out.writeInt32LE(OP_REPLY, 12);
  out.writeInt32LE(flags, 16);
  out.writeBigInt64LE(cursorId, 20);
  out.writeInt32LE(0, 28);
  out.writeInt32LE(docs.length, 32);
  let off = 36;
  for (const d of docs) {
    out.set(d, off);
    off += d.length;
  }
  return out;
}
