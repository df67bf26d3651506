// OP_MSG (opcode 2013): flagBits uint32, then sections, then an optional CRC-32C.
// Spec: github.com/mongodb/specifications source/message/OP_MSG.md
//   section kind 0: one BSON document (the command or reply body) — exactly one per message;
//   section kind 1: int32 size, cstring identifier, BSON documents… (a "document sequence").

import {
  HEADER_SIZE, MSG_CHECKSUM_PRESENT, MSG_KNOWN_REQUIRED_BITS, MSG_REQUIRED_BITS_MASK, OP_MSG,
  SECTION_BODY, SECTION_DOCUMENT_SEQUENCE,
} from './constants.ts';
import { checkDocument, skipCString } from './bson-peek.ts';
import { crc32c } from './crc32c.ts';
import { WireError } from './errors.ts';

export interface DocSequence {
  readonly id: string;
  /** The sequence's documents, concatenated (a view into the frame). */
  readonly payload: Buffer;
}

/** A parsed OP_MSG: views into the frame it came from, nothing copied. */
export class OpMsg {
  readonly requestId: number;
  readonly responseTo: number;
  readonly flags: number;
  /** The kind-0 body document. */
  readonly body: Buffer;
  readonly sequences: DocSequence[] | null;
  constructor(requestId: number, responseTo: number, flags: number, body: Buffer, sequences: DocSequence[] | null) {
    this.requestId = requestId;
    this.responseTo = responseTo;
    this.flags = flags;
    this.body = body;
    this.sequences = sequences;
  }
}

function bad(message: string): never {
  throw new WireError('PROXY_ERR_BAD_SECTION', message, true);
}

/** Parses and validates an OP_MSG frame (header included). Throws WireError. */
export function parseOpMsg(frame: Buffer): OpMsg {
  const len = frame.length;
  if (len < HEADER_SIZE + 4 + 1 + 5) bad('OP_MSG too short to hold a body section');
  const flags = frame.readUInt32LE(HEADER_SIZE);
  const unknown = flags & MSG_REQUIRED_BITS_MASK & ~MSG_KNOWN_REQUIRED_BITS;
  if (unknown !== 0) {
    throw new WireError('PROXY_ERR_BAD_FLAGS', `OP_MSG has unknown required flag bits 0x${unknown.toString(16)}`, true);
  }
  let end = len;
  if (flags & MSG_CHECKSUM_PRESENT) {
    end = len - 4;
    if (end < HEADER_SIZE + 4 + 1) bad('OP_MSG checksum flag set but no room for a checksum');
    const expected = frame.readUInt32LE(end);
    const actual = crc32c(frame, 0, end);
    if (expected !== actual) {
      throw new WireError('PROXY_ERR_BAD_CHECKSUM',
        `OP_MSG checksum mismatch: message says 0x${expected.toString(16)}, content gives 0x${actual.toString(16)}`, true);
    }
  }

  let body: Buffer | null = null;
  let sequences: DocSequence[] | null = null;
  let off = HEADER_SIZE + 4;
  while (off < end) {
    const kind = frame[off++];
    if (kind === SECTION_BODY) {
      if (body !== null) bad('OP_MSG has more than one kind-0 section');
      const n = checkDocument(frame, off, end);
      body = frame.subarray(off, off + n);
      off += n;
    } else if (kind === SECTION_DOCUMENT_SEQUENCE) {
      if (off + 4 > end) bad('truncated document sequence');
      const size = frame.readInt32LE(off);
      const seqEnd = off + size;
      if (size < 5) bad(`document sequence size ${size} is below 5, the least a sequence takes (its size and an empty identifier)`);
      if (seqEnd > end) bad(`document sequence size ${size} exceeds the message`);
      const idEnd = skipCString(frame, off + 4, seqEnd);
      const id = frame.toString('utf8', off + 4, idEnd - 1);
      let p = idEnd;
      while (p < seqEnd) p += checkDocument(frame, p, seqEnd);
      if (sequences === null) sequences = [];
      for (let i = 0; i < sequences.length; i++) {
        if (sequences[i].id === id) bad(`duplicate document sequence identifier "${id}"`);
      }
      sequences.push({ id, payload: frame.subarray(idEnd, seqEnd) });
      off = seqEnd;
    } else {
      bad(`unknown OP_MSG section kind ${kind}`);
    }
  }
  if (body === null) bad('OP_MSG has no kind-0 section');
  return new OpMsg(frame.readInt32LE(4), frame.readInt32LE(8), flags, body, sequences);
}

/**
 * The kind-0 body of an OP_MSG frame, validated as parseOpMsg() does. The common shape (no
 * checksum, the body the only section) is read without parsing: no OpMsg, no sequence list, no
 * header reads beyond the flags (a reply's body per request, for the response phase). Any other
 * shape goes through parseOpMsg(), and so does every error.
 */
export function opMsgBody(frame: Buffer): Buffer {
  const len = frame.length;
  if (len >= HEADER_SIZE + 4 + 1 + 5 && frame[HEADER_SIZE + 4] === SECTION_BODY) {
    const flags = frame[HEADER_SIZE] | (frame[HEADER_SIZE + 1] << 8) | (frame[HEADER_SIZE + 2] << 16) | (frame[HEADER_SIZE + 3] << 24);
    const off = HEADER_SIZE + 5;
    const n = frame[off] | (frame[off + 1] << 8) | (frame[off + 2] << 16) | (frame[off + 3] << 24);
    if ((flags & (MSG_CHECKSUM_PRESENT | (MSG_REQUIRED_BITS_MASK & ~MSG_KNOWN_REQUIRED_BITS))) === 0 && n >= 5 && off + n === len &&
      frame[len - 1] === 0) {
      return frame.subarray(off, len);
    }
  }
  return parseOpMsg(frame).body;
}

/** Builds an OP_MSG frame with a single kind-0 section (and optional sequences). */
export function encodeOpMsg(
  requestId: number, responseTo: number, flags: number, body: Uint8Array,
  sequences: readonly DocSequence[] | null = null,
): Buffer {
  const withChecksum = (flags & MSG_CHECKSUM_PRESENT) !== 0;
  let size = HEADER_SIZE + 4 + 1 + body.length + (withChecksum ? 4 : 0);
  const ids: Buffer[] = [];
  if (sequences !== null) {
    for (const s of sequences) {
      const id = Buffer.from(s.id + '\0', 'utf8');
      ids.push(id);
      size += 1 + 4 + id.length + s.payload.length;
    }
  }
  const out = Buffer.allocUnsafe(size);
  out.writeInt32LE(size, 0);
  out.writeInt32LE(requestId, 4);
  out.writeInt32LE(responseTo, 8);
  out.writeInt32LE(OP_MSG, 12);
  out.writeUInt32LE(flags >>> 0, 16);
  out[20] = SECTION_BODY;
  out.set(body, 21);
  let off = 21 + body.length;
  if (sequences !== null) {
    for (let i = 0; i < sequences.length; i++) {
      const s = sequences[i];
      out[off++] = SECTION_DOCUMENT_SEQUENCE;
      out.writeInt32LE(4 + ids[i].length + s.payload.length, off);
      off += 4;
      out.set(ids[i], off);
      off += ids[i].length;
      out.set(s.payload, off);
      off += s.payload.length;
    }
  }
  if (withChecksum) out.writeUInt32LE(crc32c(out, 0, off), off);
  return out;
}

/**
 * Rewrites an OP_MSG frame in place for forwarding: new requestID/responseTo, flag bits cleared as
 * asked, and the checksum dropped (the header changed, so the old one no longer holds). Returns the
 * view to send (shorter by 4 bytes when a checksum was dropped).
 */
export function retargetOpMsg(frame: Buffer, requestId: number, responseTo: number, clearFlags: number): Buffer {
  frame.writeInt32LE(requestId, 4);
  frame.writeInt32LE(responseTo, 8);
  const flags = frame.readUInt32LE(HEADER_SIZE);
  const drop = (flags & MSG_CHECKSUM_PRESENT) !== 0;
  const next = flags & ~(clearFlags | MSG_CHECKSUM_PRESENT);
  if (next !== flags) frame.writeUInt32LE(next >>> 0, HEADER_SIZE);
  if (!drop) return frame;
  const len = frame.length - 4;
  frame.writeInt32LE(len, 0);
  return frame.subarray(0, len);
}

/**
 * The command document with every document sequence folded in as an array field of the same name
 * (OP_MSG spec: a sequence is equivalent to that array). Used when a plugin asks for the whole
 * command; never on the plain forwarding path.
 */
export function foldSequences(body: Uint8Array, sequences: readonly DocSequence[] | null): Buffer {
  if (sequences === null || sequences.length === 0) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  let extra = 0;
  const names: Buffer[] = [];
  const counts: number[] = [];
  const keyBytes: number[] = [];
  for (const s of sequences) {
    const name = Buffer.from(s.id, 'utf8');
    names.push(name);
    let n = 0;
    let keys = 0;
    let p = 0;
    const pl = s.payload;
    while (p < pl.length) {
      p += pl[p] | (pl[p + 1] << 8) | (pl[p + 2] << 16) | (pl[p + 3] << 24);
      keys += String(n).length + 2; // type byte + key + NUL
      n++;
    }
    counts.push(n);
    keyBytes.push(keys);
    // element: type(1) name NUL(1) then array doc: int32 + elements + NUL
    extra += 1 + name.length + 1 + 4 + keys + pl.length + 1;
  }
  const total = body.length + extra;
  const out = Buffer.allocUnsafe(total);
  out.set(body.subarray(0, body.length - 1), 0); // without the trailing NUL
  out.writeInt32LE(total, 0);
  let off = body.length - 1;
  for (let i = 0; i < sequences.length; i++) {
    const pl = sequences[i].payload;
    out[off++] = 0x04;
    out.set(names[i], off);
    off += names[i].length;
    out[off++] = 0;
    out.writeInt32LE(4 + keyBytes[i] + pl.length + 1, off);
    off += 4;
    let p = 0;
    for (let k = 0; k < counts[i]; k++) {
      const dl = pl[p] | (pl[p + 1] << 8) | (pl[p + 2] << 16) | (pl[p + 3] << 24);
      out[off++] = 0x03;
      off += out.write(String(k), off, 'latin1');
      out[off++] = 0;
      out.set(pl.subarray(p, p + dl), off);
      off += dl;
      p += dl;
    }
    out[off++] = 0;
  }
  out[off++] = 0;
  return out;
}
