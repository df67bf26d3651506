// A command's top-level field names must be unique, and no document sequence may share its name
// with a field of the body. mongod refuses both (IDL parsers: 40413 "is a duplicate field"; OP_MSG
// parsing: 40433 "Duplicate field between body and document sequence"), but readers of a document
// with a repeated name disagree on which copy counts: the proxy's peek and the BSON library keep
// the last, a step's path lookup and mongod's getField the first. A step could then judge one value
// (a filter's `filter.email`, a `$db`) while the upstream acts on the other, so such a request is
// refused here, before any step or upstream sees it.
//
// Cost: one walk over the top-level elements; up to SMALL names are compared pairwise (no
// allocation, a length test mostly), more go through a hash table sized to the body.

import { ElementCursor, BSON_DOCUMENT } from './bson-peek.ts';
import { WireError } from './errors.ts';
import type { DocSequence } from './op-msg.ts';

/** Bodies with at most this many fields are checked pairwise. */
const SMALL = 16;
const starts = new Int32Array(SMALL);
const ends = new Int32Array(SMALL);
const cursor = new ElementCursor();

function duplicate(buf: Buffer, start: number, end: number): never {
  throw new WireError('PROXY_ERR_DUPLICATE_FIELD', `BSON field '${buf.toString('utf8', start, end)}' is a duplicate field in the command`, true);
}

function sameName(buf: Buffer, a: number, aEnd: number, b: number, bEnd: number): boolean {
  if (aEnd - a !== bEnd - b) return false;
  for (let i = 0; i < aEnd - a; i++) if (buf[a + i] !== buf[b + i]) return false;
  return true;
}

/** Throws WireError PROXY_ERR_DUPLICATE_FIELD when `body` (already validated) repeats a top-level name or a sequence names a body field. */
export function checkUniqueFields(body: Buffer, sequences: readonly DocSequence[] | null): void {
  const cur = cursor.open(body, 0);
  let n = 0;
  while (cur.next()) {
    if (n === SMALL) {
      checkLarge(body);
      break;
    }
    const s = cur.nameStart;
    const e = cur.nameEnd;
    for (let i = 0; i < n; i++) if (sameName(body, starts[i], ends[i], s, e)) duplicate(body, s, e);
    starts[n] = s;
    ends[n] = e;
    n++;
  }
  if (sequences !== null) {
    for (let i = 0; i < sequences.length; i++) {
      const id = sequences[i].id;
      if (inBody(body, id)) {
        throw new WireError('PROXY_ERR_DUPLICATE_FIELD', `document sequence "${id}" is also a field of the command body`, true);
      }
    }
  }
}

/** Many fields: an open-addressing table of name offsets (FNV-1a of the name bytes). */
function checkLarge(body: Buffer): void {
  const cur = cursor.open(body, 0);
  let count = 0;
  while (cur.next()) count++;
  let size = 64;
  while (size < count * 2) size *= 2;
  const mask = size - 1;
  const table = new Int32Array(size * 2); // [nameStart + 1, nameEnd] per slot; 0: empty
  cursor.open(body, 0);
  while (cur.next()) {
    const s = cur.nameStart;
    const e = cur.nameEnd;
    let h = 0x811c9dc5;
    for (let i = s; i < e; i++) h = Math.imul(h ^ body[i], 0x01000193);
    let slot = h & mask;
    for (;;) {
      const at = table[slot * 2];
      if (at === 0) {
        table[slot * 2] = s + 1;
        table[slot * 2 + 1] = e;
        break;
      }
      if (sameName(body, at - 1, table[slot * 2 + 1], s, e)) duplicate(body, s, e);
      slot = (slot + 1) & mask;
    }
  }
}

const pathCursor = new ElementCursor();
/** Each sequence identifier's path parts as bytes ("documents", "updates", …: a handful per application), kept so a check allocates nothing. */
const pathParts = new Map<string, Buffer[]>();
const MAX_PATHS = 64;

function partsOf(id: string): Buffer[] {
  let parts = pathParts.get(id);
  if (parts === undefined) {
    parts = id.split('.').map((p) => Buffer.from(p, 'utf8'));
    if (pathParts.size >= MAX_PATHS) pathParts.clear();
    pathParts.set(id, parts);
  }
  return parts;
}

/** Whether the dotted path `id` names an element of `body` (through embedded documents, as mongod looks it up). */
function inBody(body: Buffer, id: string): boolean {
  const parts = partsOf(id);
  const cur = pathCursor;
  let off = 0;
  for (let p = 0; p < parts.length; p++) {
    const name = parts[p];
    cur.open(body, off);
    let found = false;
    while (cur.next()) {
      if (cur.nameIs(name)) {
        found = true;
        break;
      }
    }
    if (!found) return false;
    if (p === parts.length - 1) return true;
    if (cur.type !== BSON_DOCUMENT) return false;
    off = cur.valueStart;
  }
  return false;
}
