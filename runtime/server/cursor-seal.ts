// Cursor ids tied to the proxy user that opened them (client authentication on). Every proxy user
// reaches the upstream as the upstream URI's user, so the upstream's own check that a cursor
// belongs to the user asking cannot tell proxy users apart. Instead the proxy never shows a client
// the upstream's cursor id: it hands out a sealed id, a keyed permutation of the upstream's id
// under a key of the connection's user (the anonymous "user" of auth.mode optional has one too),
// and reads the ids a client sends back (getMore, killCursors) with the same user's key. Another
// user's sealed id opens under the wrong key to an id the upstream does not have: the client gets
// the upstream's own answer for an unknown cursor (CursorNotFound; `cursorsNotFound`).
//
// Stateless: the key is HMAC-SHA256(secret, user) — the secret is one per process tree (the
// primary hands it to its workers), so a getMore may reach any worker; derived from
// auth.secret_file when set (client-auth.ts configuredAuthSecret), so that every instance given
// the file, and an instance after a restart, opens the same ids. It is not derived from the
// user's SCRAM credential alone: a user knows its own password, so it could compute its own key,
// and with an upstream id learned elsewhere ($currentOp lists cursors) seal that id itself.
//
// The permutation is Speck64/128 (Beaulieu et al., "The SIMON and SPECK Families of Lightweight
// Block Ciphers", 2013): a 64-bit block cipher of 32-bit additions, rotations and xors — tens of
// nanoseconds in JavaScript, where a Feistel network over node:crypto's AES or HMAC costs
// microseconds per id. 0 (no cursor) stays 0, and an id stays on its side of the sign bit (cycle
// walking: the cipher is applied again until the result is nonzero with the same sign), so
// positive upstream ids stay positive.
//
// Internally — pipeline steps, the proxy's logs, routing and cursor pins, load-balanced cleanup —
// every id is the upstream's: requests are unsealed when they are read, replies sealed as they are
// written to the client.
import { createHmac } from 'node:crypto';
import { BSON_ARRAY, BSON_DOCUMENT, BSON_INT32, BSON_INT64, BSON_STRING, ElementCursor, utf8, type CommandPeek } from '../wire/index.ts';
import { ErrorCodes, ProxyError } from '../errors/index.ts';

const ROUNDS = 27;

const ror = (v: number, r: number): number => ((v >>> r) | (v << (32 - r))) >>> 0;
const rol = (v: number, r: number): number => ((v << r) | (v >>> (32 - r))) >>> 0;

/** A 64-bit keyed permutation (Speck64/128), kept to nonzero ids of one sign. */
export class CursorSeal {
  private readonly k = new Uint32Array(ROUNDS);
  // The block being worked on (no allocation per id).
  private x = 0;
  private y = 0;

  /** `key`: 16 bytes (the key words k0, l0, l1, l2, little-endian). */
  constructor(key: Uint8Array) {
    const b = Buffer.from(key.buffer, key.byteOffset, key.byteLength);
    if (b.length !== 16) throw new Error('CursorSeal needs a 16-byte key');
    this.schedule(b.readUInt32LE(0), [b.readUInt32LE(4), b.readUInt32LE(8), b.readUInt32LE(12)]);
  }

  /** Speck64/128's key schedule from the key words (k0; l0, l1, l2). */
  private schedule(k0: number, l: number[]): void {
    const k = this.k;
    k[0] = k0;
    for (let i = 0; i < ROUNDS - 1; i++) {
      const li = ((((k[i] + ror(l[i], 8)) >>> 0) ^ i) >>> 0);
      l.push(li);
      k[i + 1] = (rol(k[i], 3) ^ li) >>> 0;
    }
  }

  /** One Speck64/128 encryption of the block (x, y) — for the published test vector. */
  encryptBlock(x: number, y: number): [number, number] {
    this.x = x >>> 0;
    this.y = y >>> 0;
    this.encrypt();
    return [this.x, this.y];
  }

  private encrypt(): void {
    const k = this.k;
    let x = this.x;
    let y = this.y;
    for (let i = 0; i < ROUNDS; i++) {
      x = (((ror(x, 8) + y) >>> 0) ^ k[i]) >>> 0;
      y = (rol(y, 3) ^ x) >>> 0;
    }
    this.x = x;
    this.y = y;
  }

  private decrypt(): void {
    const k = this.k;
    let x = this.x;
    let y = this.y;
    for (let i = ROUNDS - 1; i >= 0; i--) {
      y = ror((y ^ x) >>> 0, 3);
      x = rol((((x ^ k[i]) >>> 0) - y) >>> 0, 8);
    }
    this.x = x;
    this.y = y;
  }

  /** The int64 at buf[off] (little-endian) replaced by its sealed id. */
  sealAt(buf: Buffer, off: number): void {
    this.walk(buf, off, true);
  }

  /** The int64 at buf[off] replaced by the id it seals (the inverse of sealAt). */
  unsealAt(buf: Buffer, off: number): void {
    this.walk(buf, off, false);
  }

  /** Cycle walking: the cipher (or its inverse) until the result is nonzero with the input's sign. */
  private walk(buf: Buffer, off: number, forward: boolean): void {
    const lo = buf.readUInt32LE(off);
    const hi = buf.readUInt32LE(off + 4);
    if (lo === 0 && hi === 0) return;
    const sign = hi >>> 31;
    this.x = hi;
    this.y = lo;
    do {
      if (forward) this.encrypt();
      else this.decrypt();
    } while ((this.x >>> 31) !== sign || (this.x === 0 && this.y === 0));
    buf.writeUInt32LE(this.y, off);
    buf.writeUInt32LE(this.x, off + 4);
  }

  private readonly scratch = Buffer.alloc(8);

  seal(id: bigint): bigint {
    this.scratch.writeBigInt64LE(id, 0);
    this.sealAt(this.scratch, 0);
    return this.scratch.readBigInt64LE(0);
  }

  unseal(id: bigint): bigint {
    this.scratch.writeBigInt64LE(id, 0);
    this.unsealAt(this.scratch, 0);
    return this.scratch.readBigInt64LE(0);
  }
}

/**
 * The seal of one identity under the process tree's `secret`: `user` null is the anonymous
 * connection (auth.mode optional). A user's key covers its name, database and server key, so a
 * user removed and added again with another password does not inherit the old one's cursors.
 */
export function deriveCursorSeal(secret: Buffer, user: { db: string; name: string; serverKey: Buffer } | null): CursorSeal {
  const h = createHmac('sha256', secret).update('pipeline-proxy cursor id v1');
  const part = (b: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.length, 0);
    h.update(len).update(b);
  };
  if (user === null) part(Buffer.from('anonymous'));
  else {
    part(Buffer.from('user'));
    part(Buffer.from(user.db, 'utf8'));
    part(Buffer.from(user.name, 'utf8'));
    part(user.serverKey);
  }
  return new CursorSeal(h.digest().subarray(0, 16));
}

/**
 * Commands whose reply can carry a cursor (`cursor.id`), or, for killCursors, cursor ids in its
 * arrays: only their replies are scanned. Others answer no cursor (mongod 8.0's bulkWrite does).
 */
export const CURSOR_COMMANDS: ReadonlySet<string> = new Set([
  'find', 'aggregate', 'getMore', 'listCollections', 'listIndexes', 'listSearchIndexes', 'bulkWrite',
  'checkMetadataConsistency', 'killCursors',
]);

const K_CURSOR = utf8('cursor');
const K_ID = utf8('id');
const K_CURSORS = utf8('cursors');
const KILL_REPLY_ARRAYS = ['cursorsKilled', 'cursorsNotFound', 'cursorsAlive', 'cursorsUnknown'].map(utf8);

/** Reused cursors over the BSON being rewritten (one thread: one request at a time). */
const outer = new ElementCursor();
const inner = new ElementCursor();

/**
 * The reply document at buf[at] to command `op` with its cursor ids sealed: `cursor.id` (and, for
 * killCursors, the ids of its four arrays), in place — or, with `copy`, in a copy made only when
 * there is an id to seal (a step's answer may be a buffer the step keeps). One pass over the
 * top-level fields, only for CURSOR_COMMANDS.
 */
export function sealReply(buf: Buffer, at: number, op: string, seal: CursorSeal, copy: boolean): Buffer {
  if (!CURSOR_COMMANDS.has(op)) return buf;
  let out = buf;
  const cur = outer.open(buf, at);
  while (cur.next()) {
    if (cur.type === BSON_DOCUMENT && cur.nameIs(K_CURSOR)) {
      const c = inner.open(buf, cur.valueStart, cur.valueEnd);
      while (c.next()) {
        if (c.type === BSON_INT64 && c.nameIs(K_ID)) {
          if (buf.readBigInt64LE(c.valueStart) !== 0n) {
            if (copy && out === buf) out = Buffer.from(buf);
            seal.sealAt(out, c.valueStart);
          }
          break;
        }
      }
    } else if (op === 'killCursors' && cur.type === BSON_ARRAY && KILL_REPLY_ARRAYS.some((k) => cur.nameIs(k))) {
      const a = inner.open(buf, cur.valueStart, cur.valueEnd);
      while (a.next()) {
        if (a.type !== BSON_INT64) continue;
        if (copy && out === buf) out = Buffer.from(buf);
        seal.sealAt(out, a.valueStart);
      }
    }
  }
  return out;
}

/**
 * The command document `body` (which `peek` has read) with the cursor ids a client sent unsealed
 * in place: getMore's id (and peek.cursorId with it) and the ids of killCursors' `cursors`.
 * Other commands are left alone. An id of another type than long is refused here (TypeMismatch,
 * as mongod refuses it): passed on unopened, it could name an upstream id directly.
 */
export function unsealRequest(body: Buffer, peek: CommandPeek, seal: CursorSeal): void {
  if (peek.op === 'getMore') {
    const cur = outer.open(body, 0);
    if (!cur.next()) return;
    if (cur.type !== BSON_INT64) throw new ProxyError(ErrorCodes.TypeMismatch, "BSON field 'getMore.getMore' is the wrong type, expected type 'long'");
    seal.unsealAt(body, cur.valueStart);
    peek.cursorId = body.readBigInt64LE(cur.valueStart);
  } else if (peek.op === 'killCursors') {
    const cur = outer.open(body, 0);
    while (cur.next()) {
      if (!cur.nameIs(K_CURSORS)) continue;
      if (cur.type !== BSON_ARRAY) throw new ProxyError(ErrorCodes.TypeMismatch, "BSON field 'killCursors.cursors' is the wrong type, expected type 'array'");
      const a = inner.open(body, cur.valueStart, cur.valueEnd);
      while (a.next()) {
        if (a.type !== BSON_INT64) throw new ProxyError(ErrorCodes.TypeMismatch, "BSON field 'killCursors.cursors' must contain cursor ids of type long");
        seal.unsealAt(body, a.valueStart);
      }
    }
  }
}

const K_CODE = utf8('code');
const K_ERRMSG = utf8('errmsg');
const CURSOR_NOT_FOUND = 43;

/**
 * The reply document at buf[at] to a getMore whose id the client sent sealed (`peek.cursorId` is
 * the upstream's, unsealed): when it is a CursorNotFound (43) whose errmsg names the upstream's id
 * ("cursor id 123 not found"), a new document whose errmsg names the id the client sent instead —
 * the upstream's id is never shown, and the client reads the id it asked for. Null otherwise (the
 * reply is written as it is).
 */
export function renameNotFoundCursor(buf: Buffer, at: number, peek: CommandPeek, seal: CursorSeal): Buffer | null {
  if (peek.op !== 'getMore' || peek.cursorId === 0n) return null;
  let notFound = false;
  let msgStart = -1;
  let msgEnd = -1;
  const cur = outer.open(buf, at);
  while (cur.next()) {
    if (cur.type === BSON_INT32 && cur.nameIs(K_CODE)) notFound = buf.readInt32LE(cur.valueStart) === CURSOR_NOT_FOUND;
    else if (cur.type === BSON_STRING && cur.nameIs(K_ERRMSG)) {
      msgStart = cur.valueStart;
      msgEnd = cur.valueEnd;
    }
  }
  if (!notFound || msgStart < 0) return null;
  const upstream = peek.cursorId.toString();
  const message = buf.toString('utf8', msgStart + 4, msgEnd - 1);
  // The id as a whole number: not a run of digits inside a longer one.
  const named = new RegExp(`(?<![0-9${peek.cursorId > 0n ? '-' : ''}])${upstream}(?![0-9])`, 'g');
  if (!named.test(message)) return null;
  const text = Buffer.from(message.replace(named, seal.seal(peek.cursorId).toString()), 'utf8');
  const docEnd = at + buf.readInt32LE(at);
  const out = Buffer.concat([buf.subarray(at, msgStart), Buffer.alloc(4), text, Buffer.alloc(1), buf.subarray(msgEnd, docEnd)]);
  out.writeInt32LE(text.length + 1, msgStart - at);
  out.writeInt32LE(out.length, 0);
  return out;
}
