// Fuzzing helpers for the wire path: a seeded PRNG, a structural map of a request frame (where its
// length fields, flags, sections and BSON length prefixes are), mutation operators over captured
// client frames, a reference framer that says which frames a byte stream holds and which of them
// are owed a reply, and a capture of the proxy's log lines. Written from the wire spec, not from the
// proxy's codec, so a codec bug cannot hide itself (only zstd's wasm initialisation is shared).
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { deflateSync, inflateSync } from 'node:zlib';
import snappy from 'snappy';
import * as zstd from '@bokuweb/zstd-wasm';
import { deserialize, type Document } from 'bson';
import { crc32c } from './wire.ts';

export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_COMPRESSED = 2012;
export const OP_MSG = 2013;
export const MAX_MESSAGE_SIZE = 48_000_000;
export const FLAG_CHECKSUM = 1 << 0;
export const FLAG_MORE_TO_COME = 1 << 1;
export const FLAG_EXHAUST_ALLOWED = 1 << 16;

// ---- PRNG ----------------------------------------------------------------------------------

/** mulberry32: small, fast, and the same sequence on every platform for a given seed. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  u32(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
  /** Integer in [0, n). */
  int(n: number): number {
    return n <= 0 ? 0 : this.u32() % n;
  }
  /** Integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  chance(p: number): boolean {
    return this.u32() / 0x1_0000_0000 < p;
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)];
  }
}

/** The seed of iteration `i` of a run seeded with `seed` (so one iteration can be replayed alone). */
export function iterationSeed(seed: number, i: number): number {
  let h = (seed ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

export function parseSeed(s: string | undefined): number | null {
  if (s === undefined || s.trim() === '') return null;
  const n = Number(s.trim());
  if (!Number.isFinite(n)) throw new Error(`PROXY_FUZZ_SEED is not a number: ${s}`);
  return n >>> 0;
}

export function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

// ---- compression (independent of the proxy's codec) ----------------------------------------

export const COMPRESSOR_NOOP = 0;
export const COMPRESSOR_SNAPPY = 1;
export const COMPRESSOR_ZLIB = 2;
export const COMPRESSOR_ZSTD = 3;

export function compressBytes(id: number, data: Buffer): Buffer {
  switch (id) {
    case COMPRESSOR_NOOP: return Buffer.from(data);
    case COMPRESSOR_SNAPPY: return snappy.compressSync(data) as Buffer;
    case COMPRESSOR_ZLIB: return deflateSync(data);
    case COMPRESSOR_ZSTD: return Buffer.from(zstd.compress(data, 3));
    default: throw new Error(`no compressor ${id}`);
  }
}

export function decompressBytes(id: number, data: Buffer, size: number): Buffer {
  switch (id) {
    case COMPRESSOR_NOOP: return Buffer.from(data);
    case COMPRESSOR_SNAPPY: return snappy.uncompressSync(data) as Buffer;
    case COMPRESSOR_ZLIB: return inflateSync(data, { maxOutputLength: Math.max(1, size) });
    case COMPRESSOR_ZSTD: return Buffer.from(zstd.decompress(data));
    default: throw new Error(`no compressor ${id}`);
  }
}

/** OP_COMPRESSED → the original frame (header rebuilt), or null when it does not decompress cleanly. */
export function unwrapCompressed(frame: Buffer): Buffer | null {
  if (frame.length < 25 || frame.readInt32LE(12) !== OP_COMPRESSED) return null;
  const op = frame.readInt32LE(16);
  const size = frame.readInt32LE(20);
  const id = frame[24];
  if (size < 0 || size > MAX_MESSAGE_SIZE || op === OP_COMPRESSED) return null;
  try {
    const plain = decompressBytes(id, frame.subarray(25), size);
    if (plain.length !== size) return null;
    const out = Buffer.alloc(16 + size);
    out.writeInt32LE(16 + size, 0);
    frame.copy(out, 4, 4, 12);
    out.writeInt32LE(op, 12);
    plain.copy(out, 16);
    return out;
  } catch {
    return null;
  }
}

/** Wraps a frame in OP_COMPRESSED. */
export function wrapCompressed(frame: Buffer, id: number): Buffer {
  const packed = compressBytes(id, frame.subarray(16));
  const out = Buffer.alloc(25 + packed.length);
  out.writeInt32LE(out.length, 0);
  frame.copy(out, 4, 4, 12);
  out.writeInt32LE(OP_COMPRESSED, 12);
  out.writeInt32LE(frame.readInt32LE(12), 16);
  out.writeInt32LE(frame.length - 16, 20);
  out[24] = id;
  packed.copy(out, 25);
  return out;
}

// ---- structure of a request frame -----------------------------------------------------------

export interface LengthField {
  /** Offset of the int32 length prefix. */
  at: number;
  what: 'document' | 'string' | 'binary' | 'sequence';
}

export interface Layout {
  opCode: number;
  /** OP_MSG / OP_QUERY flag word offset (16), or -1. */
  flagsAt: number;
  /** Offsets of OP_MSG section kind bytes. */
  sections: Array<{ kindAt: number; kind: number; end: number }>;
  lengths: LengthField[];
  /** OP_MSG with checksumPresent: offset of the CRC, else -1. */
  crcAt: number;
}

const u8i32 = (b: Buffer, o: number) => (o + 4 <= b.length ? b.readInt32LE(o) : -1);

/** Records length prefixes inside the BSON document at `off`; tolerant of garbage (stops early). */
function walkDocument(b: Buffer, off: number, limit: number, out: LengthField[], depth: number): number {
  const len = u8i32(b, off);
  if (len < 5 || off + len > limit) return -1;
  out.push({ at: off, what: 'document' });
  const end = off + len - 1;
  let p = off + 4;
  while (p < end) {
    const type = b[p++];
    const nul = b.indexOf(0, p);
    if (nul < 0 || nul >= end) return len;
    p = nul + 1;
    let n: number;
    switch (type) {
      case 0x01: case 0x09: case 0x11: case 0x12: n = 8; break;
      case 0x02: case 0x0d: case 0x0e: out.push({ at: p, what: 'string' }); n = 4 + u8i32(b, p); break;
      case 0x03: case 0x04:
        if (depth < 8) walkDocument(b, p, end, out, depth + 1);
        n = u8i32(b, p);
        break;
      case 0x05: out.push({ at: p, what: 'binary' }); n = 5 + u8i32(b, p); break;
      case 0x06: case 0x0a: case 0x7f: case 0xff: n = 0; break;
      case 0x07: n = 12; break;
      case 0x08: n = 1; break;
      case 0x10: n = 4; break;
      case 0x13: n = 16; break;
      case 0x0f: n = u8i32(b, p); break;
      case 0x0b: {
        const a = b.indexOf(0, p);
        const c = a < 0 ? -1 : b.indexOf(0, a + 1);
        if (c < 0) return len;
        n = c + 1 - p;
        break;
      }
      default: return len;
    }
    if (n < 0 || p + n > end) return len;
    p += n;
  }
  return len;
}

export function layout(f: Buffer): Layout {
  const l: Layout = { opCode: f.length >= 16 ? f.readInt32LE(12) : -1, flagsAt: -1, sections: [], lengths: [], crcAt: -1 };
  if (l.opCode === OP_MSG && f.length >= 21) {
    l.flagsAt = 16;
    const flags = f.readUInt32LE(16);
    let end = f.length;
    if (flags & FLAG_CHECKSUM && f.length >= 25) {
      end = f.length - 4;
      l.crcAt = end;
    }
    let off = 20;
    while (off < end) {
      const kindAt = off;
      const kind = f[off++];
      if (kind === 0) {
        const n = walkDocument(f, off, end, l.lengths, 0);
        if (n < 0) break;
        off += n;
      } else if (kind === 1) {
        const size = u8i32(f, off);
        if (size < 5 || off + size > end) break;
        l.lengths.push({ at: off, what: 'sequence' });
        const nul = f.indexOf(0, off + 4);
        if (nul < 0 || nul >= off + size) break;
        let p = nul + 1;
        while (p < off + size) {
          const n = walkDocument(f, p, off + size, l.lengths, 0);
          if (n < 0) break;
          p += n;
        }
        off += size;
      } else break;
      l.sections.push({ kindAt, kind, end: off });
    }
  } else if (l.opCode === OP_QUERY && f.length >= 20) {
    l.flagsAt = 16;
    const nul = f.indexOf(0, 20);
    if (nul > 0) {
      let off = nul + 1 + 8;
      const n = walkDocument(f, off, f.length, l.lengths, 0);
      if (n > 0) {
        off += n;
        if (off < f.length) walkDocument(f, off, f.length, l.lengths, 0);
      }
    }
  }
  return l;
}

// ---- mutations ------------------------------------------------------------------------------

export interface Mutant {
  bytes: Buffer;
  /** Mutation descriptions, in the order applied (e.g. "len+:+37", "flags:moreToCome"). */
  mutations: string[];
}

const BOUNDARY_BYTES = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff];
const BOUNDARY_I32 = [0, 1, -1, 4, 5, 15, 16, 17, 0x7fffffff, -0x80000000, 0x7ffffffe, MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE + 1, 16 * 1024 * 1024];
const OPCODES = [1, 2001, 2002, 2004, 2005, 2006, 2007, 2010, 2011, 2012, 2013, 0, -1, 4242];

/** Sets the header length to the buffer's length. */
function fixLength(b: Buffer): Buffer {
  if (b.length >= 4) b.writeInt32LE(b.length, 0);
  return b;
}

/** A new int32 value for a length field currently holding `v` (inside a container of `room` bytes). */
function tweakLength(rng: Rng, v: number, room: number): { value: number; how: string } {
  switch (rng.int(8)) {
    case 0: return { value: v + 1, how: '+1' };
    case 1: return { value: v - 1, how: '-1' };
    case 2: { const k = rng.range(2, 64); return { value: v + k, how: `+${k}` }; }
    case 3: { const k = rng.range(2, Math.max(2, v)); return { value: v - k, how: `-${k}` }; }
    case 4: return { value: v + room + rng.range(1, 1000), how: 'past-container' };
    default: { const x = rng.pick(BOUNDARY_I32); return { value: x, how: `=${x}` }; }
  }
}

type Op = (b: Buffer, rng: Rng, l: Layout) => { bytes: Buffer; desc: string } | null;

const ops: Record<string, { weight: number; op: Op }> = {
  bitflip: { weight: 8, op: (b, rng) => {
    const out = Buffer.from(b);
    const n = rng.range(1, 3);
    const at: string[] = [];
    for (let i = 0; i < n; i++) {
      const o = rng.int(out.length);
      const bit = rng.int(8);
      out[o] ^= 1 << bit;
      at.push(`${o}.${bit}`);
    }
    return { bytes: out, desc: `bitflip:${at.join(',')}` };
  } },
  'byte-boundary': { weight: 5, op: (b, rng) => {
    const out = Buffer.from(b);
    const n = rng.range(1, 3);
    const at: string[] = [];
    for (let i = 0; i < n; i++) {
      const o = rng.int(out.length);
      const v = rng.pick(BOUNDARY_BYTES);
      out[o] = v;
      at.push(`${o}=${v.toString(16)}`);
    }
    return { bytes: out, desc: `byte-boundary:${at.join(',')}` };
  } },
  'int32-boundary': { weight: 4, op: (b, rng) => {
    if (b.length < 20) return null;
    const out = Buffer.from(b);
    const o = rng.range(16, out.length - 4);
    const v = rng.pick(BOUNDARY_I32);
    out.writeInt32LE(v, o);
    return { bytes: out, desc: `int32-boundary:${o}=${v}` };
  } },
  // Header messageLength: increases swallow the following bytes of the stream, decreases leave the
  // rest of this frame to be read as the next header.
  'len+': { weight: 3, op: (b, rng) => {
    const out = Buffer.from(b);
    const k = rng.pick([1, 4, rng.range(1, 64), rng.range(1, b.length * 3), rng.range(1, 100_000)]);
    out.writeInt32LE(b.length + k, 0);
    return { bytes: out, desc: `len+:+${k}` };
  } },
  'len-': { weight: 3, op: (b, rng) => {
    const out = Buffer.from(b);
    const k = rng.pick([1, 4, rng.range(1, Math.max(1, b.length - 16))]);
    out.writeInt32LE(Math.max(16, b.length - k), 0);
    return { bytes: out, desc: `len-:-${b.length - Math.max(16, b.length - k)}` };
  } },
  'len-bad': { weight: 1, op: (b, rng) => {
    const out = Buffer.from(b);
    const v = rng.pick([0, 1, 15, -1, -16, MAX_MESSAGE_SIZE + 1, 0x7fffffff, -0x80000000]);
    out.writeInt32LE(v, 0);
    return { bytes: out, desc: `len-bad:=${v}` };
  } },
  truncate: { weight: 3, op: (b, rng) => {
    if (b.length <= 17) return null;
    const cut = rng.range(16, b.length - 1);
    return { bytes: fixLength(Buffer.from(b.subarray(0, cut))), desc: `truncate:${cut}` };
  } },
  // Cut the bytes but keep the declared length: the frame completes with the next frame's bytes.
  'truncate-raw': { weight: 1, op: (b, rng) => {
    const cut = rng.range(1, b.length - 1);
    return { bytes: Buffer.from(b.subarray(0, cut)), desc: `truncate-raw:${cut}` };
  } },
  append: { weight: 2, op: (b, rng) => {
    const extra = Buffer.alloc(rng.range(1, 16));
    for (let i = 0; i < extra.length; i++) extra[i] = rng.chance(0.5) ? 0 : rng.int(256);
    return { bytes: fixLength(Buffer.concat([b, extra])), desc: `append:${extra.length}` };
  } },
  'bson-length': { weight: 6, op: (b, rng, l) => {
    if (l.lengths.length === 0) return null;
    const f = rng.pick(l.lengths);
    const out = Buffer.from(b);
    const v = out.readInt32LE(f.at);
    const t = tweakLength(rng, v, b.length - f.at);
    out.writeInt32LE(t.value | 0, f.at);
    return { bytes: out, desc: `${f.what}-length@${f.at}:${v}${t.how}` };
  } },
  'section-kind': { weight: 3, op: (b, rng, l) => {
    if (l.sections.length === 0) return null;
    const s = rng.pick(l.sections);
    const out = Buffer.from(b);
    const k = rng.pick([0, 1, 2, 3, 0x7f, 0xff, s.kind ^ 1]);
    out[s.kindAt] = k;
    return { bytes: out, desc: `section-kind@${s.kindAt}:${s.kind}->${k}` };
  } },
  'section-dup': { weight: 1, op: (b, rng, l) => {
    if (l.sections.length === 0 || l.crcAt >= 0) return null;
    const s = rng.pick(l.sections);
    const copy = b.subarray(s.kindAt, s.end);
    return { bytes: fixLength(Buffer.concat([b, copy])), desc: `section-dup:kind${s.kind}` };
  } },
  'section-drop': { weight: 1, op: (b, rng, l) => {
    if (l.sections.length === 0 || l.crcAt >= 0) return null;
    const s = rng.pick(l.sections);
    return { bytes: fixLength(Buffer.concat([b.subarray(0, s.kindAt), b.subarray(s.end)])), desc: `section-drop:kind${s.kind}` };
  } },
  flags: { weight: 6, op: (b, rng, l) => {
    if (l.flagsAt < 0) return null;
    const out = Buffer.from(b);
    const flags = out.readUInt32LE(16);
    if (l.opCode === OP_QUERY) {
      const bit = rng.int(32);
      out.writeUInt32LE((flags ^ (1 << bit)) >>> 0, 16);
      return { bytes: out, desc: `query-flag:bit${bit}` };
    }
    const choice = rng.pick(['moreToCome', 'moreToCome', 'exhaustAllowed', 'checksum-raw', 'checksum-valid', 'checksum-valid',
      'checksum-bad', 'unknown-required', 'unknown-optional'] as const);
    switch (choice) {
      case 'moreToCome': out.writeUInt32LE((flags ^ FLAG_MORE_TO_COME) >>> 0, 16); break;
      case 'exhaustAllowed': out.writeUInt32LE((flags ^ FLAG_EXHAUST_ALLOWED) >>> 0, 16); break;
      case 'checksum-raw': out.writeUInt32LE((flags ^ FLAG_CHECKSUM) >>> 0, 16); break;
      case 'unknown-required': {
        const bit = rng.range(2, 15);
        out.writeUInt32LE((flags ^ (1 << bit)) >>> 0, 16);
        return { bytes: out, desc: `flags:required-bit${bit}` };
      }
      case 'unknown-optional': {
        const bit = rng.range(17, 31);
        out.writeUInt32LE((flags ^ (1 << bit)) >>> 0, 16);
        return { bytes: out, desc: `flags:optional-bit${bit}` };
      }
      case 'checksum-valid': case 'checksum-bad': {
        if (l.crcAt >= 0) return null;
        const withCrc = Buffer.concat([out, Buffer.alloc(4)]);
        withCrc.writeUInt32LE((flags | FLAG_CHECKSUM) >>> 0, 16);
        fixLength(withCrc);
        let crc = crc32c(withCrc.subarray(0, withCrc.length - 4));
        if (choice === 'checksum-bad') crc = (crc ^ (1 << rng.int(32))) >>> 0;
        withCrc.writeUInt32LE(crc, withCrc.length - 4);
        return { bytes: withCrc, desc: `flags:${choice}` };
      }
    }
    return { bytes: out, desc: `flags:${choice}` };
  } },
  opcode: { weight: 3, op: (b, rng) => {
    const out = Buffer.from(b);
    const was = out.readInt32LE(12);
    const v = rng.pick(OPCODES.filter((o) => o !== was));
    out.writeInt32LE(v, 12);
    return { bytes: out, desc: `opcode:${was}->${v}` };
  } },
  ids: { weight: 1, op: (b, rng) => {
    const out = Buffer.from(b);
    if (rng.chance(0.5)) {
      const v = rng.pick([0, -1, 0x7fffffff]);
      out.writeInt32LE(v, 4);
      return { bytes: out, desc: `requestId=${v}` };
    }
    const v = rng.pick([1, -1, rng.u32() | 0]);
    out.writeInt32LE(v, 8);
    return { bytes: out, desc: `responseTo=${v}` };
  } },
  // Plain frame → OP_COMPRESSED (noop, which is never negotiated, or a real compressor).
  wrap: { weight: 2, op: (b, rng, l) => {
    if (l.opCode === OP_COMPRESSED || b.length < 16) return null;
    const id = rng.pick([COMPRESSOR_NOOP, COMPRESSOR_SNAPPY, COMPRESSOR_ZLIB, COMPRESSOR_ZSTD]);
    return { bytes: wrapCompressed(b, id), desc: `wrap:compressor${id}` };
  } },
  // OP_COMPRESSED: header fields, payload bytes, or a mutation of the message inside.
  compressed: { weight: 8, op: (b, rng, l) => {
    if (l.opCode !== OP_COMPRESSED || b.length < 26) return null;
    const out = Buffer.from(b);
    switch (rng.int(7)) {
      case 0: {
        const n = rng.range(1, 4);
        for (let i = 0; i < n; i++) out[rng.range(25, out.length - 1)] ^= 1 << rng.int(8);
        return { bytes: out, desc: `cz-payload-bitflip:${n}` };
      }
      case 1: {
        const id = rng.pick([0, 1, 2, 3, 4, 255].filter((x) => x !== b[24]));
        out[24] = id;
        return { bytes: out, desc: `cz-compressor:${b[24]}->${id}` };
      }
      case 2: {
        const size = b.readInt32LE(20);
        // `size` may itself be a mutation's (0x7fffffff): the derived values wrap to int32, as on the wire.
        const v = rng.pick([0, -1, size + 1, size - 1, size * 2, MAX_MESSAGE_SIZE, 0x7fffffff]) | 0;
        out.writeInt32LE(v, 20);
        return { bytes: out, desc: `cz-size:${size}->${v}` };
      }
      case 3: {
        const v = rng.pick([2012, 2004, 2002, 1, 0, 4242]);
        out.writeInt32LE(v, 16);
        return { bytes: out, desc: `cz-original-opcode:->${v}` };
      }
      case 4: {
        const cut = rng.range(25, b.length - 1);
        return { bytes: fixLength(Buffer.from(b.subarray(0, cut))), desc: `cz-payload-truncate:${cut}` };
      }
      default: {
        const inner = unwrapCompressed(b);
        if (inner === null) return null;
        const m = mutateOnce(inner, rng, INNER_OPS);
        if (m === null) return null;
        // The inner header's length is not sent (OP_COMPRESSED carries the size); keep the opcode
        // the inner mutation chose.
        const id = b[24];
        try {
          return { bytes: wrapCompressed(m.bytes.length >= 16 ? m.bytes : Buffer.concat([m.bytes, Buffer.alloc(16 - m.bytes.length)]), id),
            desc: `cz-inner(${m.desc})` };
        } catch {
          return null;
        }
      }
    }
  } },
};

const ALL_OPS = Object.keys(ops);
/** Mutations applied to a message inside OP_COMPRESSED (header length and compression excluded). */
const INNER_OPS = ['bitflip', 'byte-boundary', 'int32-boundary', 'truncate', 'append', 'bson-length', 'section-kind',
  'section-dup', 'section-drop', 'flags', 'opcode'];

function mutateOnce(b: Buffer, rng: Rng, names: readonly string[]): { bytes: Buffer; desc: string } | null {
  const l = layout(b);
  let total = 0;
  for (const n of names) total += ops[n].weight;
  for (let attempt = 0; attempt < 8; attempt++) {
    let r = rng.int(total);
    let name = names[0];
    for (const n of names) {
      r -= ops[n].weight;
      if (r < 0) {
        name = n;
        break;
      }
    }
    const m = ops[name].op(b, rng, l);
    if (m !== null) return m;
  }
  return null;
}

/** One to three mutations of `base` (a copy; `base` is not modified). */
export function mutate(base: Buffer, rng: Rng): Mutant {
  const n = rng.chance(0.7) ? 1 : rng.chance(0.8) ? 2 : 3;
  let bytes: Buffer = Buffer.from(base);
  const mutations: string[] = [];
  for (let i = 0; i < n; i++) {
    // Stacked mutations keep the stream-level ones (length, truncate-raw) for the last step.
    const names = i < n - 1 ? ALL_OPS.filter((x) => !['len+', 'len-', 'len-bad', 'truncate-raw'].includes(x)) : ALL_OPS;
    const m = mutateOnce(bytes, rng, names);
    if (m === null) continue;
    bytes = m.bytes;
    mutations.push(m.desc);
  }
  return { bytes, mutations };
}

// ---- reference framing and expectations ---------------------------------------------------

/** What the client side may expect for one complete frame. */
export type Due = 'reply' | 'none' | 'optional';

export interface RefFrame {
  /** Offset in the stream. */
  offset: number;
  bytes: Buffer;
  requestId: number;
  opCode: number;
  due: Due;
  /** Why: e.g. "OP_MSG moreToCome". */
  why: string;
}

export interface RefStream {
  frames: RefFrame[];
  /** 'ok': ends on a frame boundary; 'partial': a frame is still incomplete; 'bad-length': unframeable. */
  end: 'ok' | 'partial' | 'bad-length';
  /** For 'partial': bytes still missing. */
  missing: number;
  /** For 'bad-length': where the bad header starts. */
  badAt: number;
}

/**
 * Whether a reply is owed: OP_MSG with moreToCome gets none (protocol); OP_COMPRESSED around an
 * OP_MSG with moreToCome gets none when it is valid and possibly an error reply when it is not;
 * OP_COMPRESSED around an OP_MSG that does not decompress cleanly may get either (the receiver
 * reads moreToCome from the start of the payload when it can, and answers when it cannot);
 * everything else is owed a reply.
 */
export function expectation(f: Buffer): { due: Due; why: string } {
  const op = f.readInt32LE(12);
  if (op === OP_MSG) {
    if (f.length >= 20 && (f.readUInt32LE(16) & FLAG_MORE_TO_COME) !== 0) return { due: 'none', why: 'OP_MSG moreToCome' };
    return { due: 'reply', why: 'OP_MSG' };
  }
  if (op === OP_COMPRESSED) {
    const inner = unwrapCompressed(f);
    if (inner !== null && inner.readInt32LE(12) === OP_MSG && inner.length >= 20 && (inner.readUInt32LE(16) & FLAG_MORE_TO_COME) !== 0) {
      return { due: 'optional', why: 'OP_COMPRESSED(OP_MSG moreToCome)' };
    }
    if (inner === null && f.length >= 20 && f.readInt32LE(16) === OP_MSG) return { due: 'optional', why: 'OP_COMPRESSED(OP_MSG, undecodable)' };
    return { due: 'reply', why: `OP_COMPRESSED(${inner === null ? 'undecodable' : inner.readInt32LE(12)})` };
  }
  return { due: 'reply', why: `opcode ${op}` };
}

/** Frames the byte stream exactly as a spec-following receiver must (length prefix, 16..48 MB). */
export function referenceFrames(stream: Buffer): RefStream {
  const frames: RefFrame[] = [];
  let off = 0;
  while (off < stream.length) {
    if (stream.length - off < 4) return { frames, end: 'partial', missing: 4 - (stream.length - off), badAt: -1 };
    const len = stream.readInt32LE(off);
    if (len < 16 || len > MAX_MESSAGE_SIZE) return { frames, end: 'bad-length', missing: 0, badAt: off };
    if (stream.length - off < len) return { frames, end: 'partial', missing: len - (stream.length - off), badAt: -1 };
    const bytes = stream.subarray(off, off + len);
    const e = expectation(bytes);
    frames.push({ offset: off, bytes, requestId: bytes.readInt32LE(4), opCode: bytes.readInt32LE(12), due: e.due, why: e.why });
    off += len;
  }
  return { frames, end: 'ok', missing: 0, badAt: -1 };
}

// ---- replies -------------------------------------------------------------------------------

export interface DecodedReply {
  opCode: number;
  body: Document | null;
  /** Why the reply could not be decoded (a malformed reply is itself a defect). */
  error: string | null;
}

export function decodeAnyReply(raw: Buffer): DecodedReply {
  let f = raw;
  let op = f.readInt32LE(12);
  try {
    if (op === OP_COMPRESSED) {
      const inner = unwrapCompressed(f);
      if (inner === null) return { opCode: op, body: null, error: 'compressed reply does not decompress' };
      f = inner;
      op = f.readInt32LE(12);
    }
    if (op === OP_MSG) {
      if (f[20] !== 0) return { opCode: op, body: null, error: `reply's first section has kind ${f[20]}` };
      const n = f.readInt32LE(21);
      return { opCode: op, body: deserialize(f.subarray(21, 21 + n)), error: null };
    }
    if (op === OP_REPLY) {
      const count = f.readInt32LE(32);
      if (count < 1) return { opCode: op, body: null, error: 'OP_REPLY without documents' };
      const n = f.readInt32LE(36);
      return { opCode: op, body: deserialize(f.subarray(36, 36 + n)), error: null };
    }
    return { opCode: op, body: null, error: `reply opcode ${op}` };
  } catch (err) {
    return { opCode: op, body: null, error: (err as Error).message };
  }
}

// ---- log capture ---------------------------------------------------------------------------

export interface CapturedLine {
  at: number;
  level: string;
  msg: string;
  fields: Record<string, unknown>;
  raw: string;
}

/**
 * Captures what the process writes to fd 2 (the proxy's logger writes there with fs.writeSync,
 * batched) and to process.stderr. Lines are parsed as JSON where possible; error-level lines are
 * passed through to the real stderr, the rest only when `passThrough`.
 */
export class StderrCapture {
  /** Error-level and unparsed lines, and the first 1000 others. */
  readonly lines: CapturedLine[] = [];
  /** Lines per "level: msg". */
  readonly counts = new Map<string, number>();
  private origWriteSync: typeof fs.writeSync | null = null;
  private origStderrWrite: typeof process.stderr.write | null = null;
  private pending = '';

  constructor(private readonly passThrough = false) {}

  start(): void {
    const orig = fs.writeSync;
    this.origWriteSync = orig;
    const self = this;
    (fs as { writeSync: unknown }).writeSync = function writeSync(fd: number, buffer: unknown, ...rest: unknown[]): number {
      if (fd !== 2) return (orig as (...a: unknown[]) => number)(fd, buffer, ...rest);
      let text: string;
      let n: number;
      if (typeof buffer === 'string') {
        text = buffer;
        n = Buffer.byteLength(buffer);
      } else {
        const b = buffer as Uint8Array;
        const off = typeof rest[0] === 'number' ? rest[0] : 0;
        const len = typeof rest[1] === 'number' ? rest[1] : b.byteLength - off;
        text = Buffer.from(b.buffer, b.byteOffset + off, len).toString('utf8');
        n = len;
      }
      const errors = self.take(text);
      if (self.passThrough) (orig as (...a: unknown[]) => number)(2, text);
      else if (errors !== '') (orig as (...a: unknown[]) => number)(2, errors);
      return n;
    };
    syncBuiltinESMExports();
    const origErr = process.stderr.write.bind(process.stderr);
    this.origStderrWrite = process.stderr.write;
    process.stderr.write = ((chunk: unknown, ...rest: unknown[]) => {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
      self.take(text);
      return (origErr as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stderr.write;
  }

  stop(): void {
    if (this.origWriteSync !== null) {
      (fs as { writeSync: unknown }).writeSync = this.origWriteSync;
      syncBuiltinESMExports();
      this.origWriteSync = null;
    }
    if (this.origStderrWrite !== null) {
      process.stderr.write = this.origStderrWrite;
      this.origStderrWrite = null;
    }
  }

  get errors(): CapturedLine[] {
    return this.lines.filter((l) => l.level === 'error' || l.level === 'fatal' || l.level === 'unparsed-error');
  }

  /** Records complete lines; returns the error-level ones as text. */
  private take(text: string): string {
    this.pending += text;
    let errors = '';
    let nl: number;
    while ((nl = this.pending.indexOf('\n')) >= 0) {
      const raw = this.pending.slice(0, nl);
      this.pending = this.pending.slice(nl + 1);
      if (raw.trim() === '') continue;
      let line: CapturedLine;
      try {
        const o = JSON.parse(raw) as Record<string, unknown>;
        const { level, msg, ...fields } = o;
        line = { at: Date.now(), level: String(level ?? ''), msg: String(msg ?? ''), fields, raw };
      } catch {
        // Not a JSON log line (a pretty line or something printed directly): an ERROR/stack is an error.
        const isErr = /\bERROR\b|^\s*at |Error:/.test(raw);
        line = { at: Date.now(), level: isErr ? 'unparsed-error' : 'unparsed', msg: raw, fields: {}, raw };
      }
      const key = `${line.level}: ${line.level.startsWith('unparsed') ? '' : line.msg}`;
      this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
      const isError = line.level === 'error' || line.level === 'fatal' || line.level === 'unparsed-error';
      if (isError || this.lines.length < 1000) this.lines.push(line);
      if (line.level === 'error' || line.level === 'fatal' || line.level === 'unparsed-error') errors += raw + '\n';
    }
    return errors;
  }
}
