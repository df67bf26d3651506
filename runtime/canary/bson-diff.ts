// The structural diff of two BSON documents for shadow canaries: what the candidate graph would
// send or answer against what the baseline did. Byte equality first (the common case costs one
// compare); when the bytes differ, both documents are walked in place with the wire layer's
// ElementCursor — no decode into objects — and the differences are listed by dotted path: a value
// changed, a type changed, a field added or removed, a document's fields reordered. Array order is
// respected (element i is compared with element i). Ignored paths (e.g. `$clusterTime`,
// `operationTime`: noise that differs between any two replies) are skipped with what is under
// them. Values are shown only when asked (`showValues`): the candidate may be the very plugin
// that redacts, and the diff ring is readable through the API.
//
// Bounded: at most `maxEntries` differences per diff (then `truncated`), paths cut at MAX_PATH
// characters, shown values at MAX_VALUE, nesting past MAX_DEPTH compared as bytes.
import { ElementCursor, checkDocument } from '../wire/index.ts';

export type DiffChange = 'changed' | 'type' | 'added' | 'removed' | 'order';

export interface DiffEntry {
  /** Dotted path from the top of the document (array elements by index, e.g. `cursor.firstBatch.0.ssn`). */
  path: string;
  change: DiffChange;
  /** BSON type names on each side (absent on the side that lacks the field). */
  baseline_type?: string;
  candidate_type?: string;
  /** The values, only with showValues (strings and numbers as text, documents summarised). */
  baseline?: string;
  candidate?: string;
}

export interface DiffOptions {
  /** Dotted paths skipped with everything under them. */
  ignore: ReadonlySet<string>;
  showValues: boolean;
  maxEntries: number;
}

export interface DiffResult {
  entries: DiffEntry[];
  /** More differences than maxEntries existed. */
  truncated: boolean;
}

export const MAX_PATH = 256;
export const MAX_VALUE = 64;
const MAX_DEPTH = 32;

const TYPE_NAMES: Record<number, string> = {
  0x01: 'double', 0x02: 'string', 0x03: 'object', 0x04: 'array', 0x05: 'binData', 0x06: 'undefined', 0x07: 'objectId', 0x08: 'bool',
  0x09: 'date', 0x0a: 'null', 0x0b: 'regex', 0x0c: 'dbPointer', 0x0d: 'javascript', 0x0e: 'symbol', 0x0f: 'javascriptWithScope',
  0x10: 'int', 0x11: 'timestamp', 0x12: 'long', 0x13: 'decimal', 0xff: 'minKey', 0x7f: 'maxKey',
};

export function typeName(t: number): string {
  return TYPE_NAMES[t] ?? `type 0x${t.toString(16)}`;
}

function asBuffer(u: Uint8Array): Buffer {
  return u instanceof Buffer ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

/** Whether two byte ranges hold the same bytes. */
function sameBytes(a: Buffer, as: number, ae: number, b: Buffer, bs: number, be: number): boolean {
  if (ae - as !== be - bs) return false;
  return a.compare(b, bs, be, as, ae) === 0;
}

/** One element of a document, as offsets into its buffer. */
interface Elem { name: string; type: number; start: number; end: number }

function elements(buf: Buffer, off: number): Elem[] {
  const cur = new ElementCursor().open(buf, off);
  const out: Elem[] = [];
  while (cur.next()) out.push({ name: cur.name(), type: cur.type, start: cur.valueStart, end: cur.valueEnd });
  return out;
}

function join(prefix: string, name: string): string {
  const p = prefix === '' ? name : `${prefix}.${name}`;
  return p.length > MAX_PATH ? `${p.slice(0, MAX_PATH - 1)}…` : p;
}

/** A value as short text (showValues only). */
function render(buf: Buffer, type: number, start: number, end: number): string {
  let s: string;
  switch (type) {
    case 0x01: s = String(buf.readDoubleLE(start)); break;
    case 0x02: case 0x0d: case 0x0e: s = JSON.stringify(buf.toString('utf8', start + 4, end - 1)); break;
    case 0x03: s = '{…}'; break;
    case 0x04: s = '[…]'; break;
    case 0x07: s = `ObjectId(${buf.toString('hex', start, start + 12)})`; break;
    case 0x08: s = buf[start] === 1 ? 'true' : 'false'; break;
    case 0x09: s = `Date(${buf.readBigInt64LE(start)})`; break;
    case 0x0a: s = 'null'; break;
    case 0x10: s = String(buf.readInt32LE(start)); break;
    case 0x11: s = `Timestamp(${buf.readUInt32LE(start + 4)}, ${buf.readUInt32LE(start)})`; break;
    case 0x12: s = String(buf.readBigInt64LE(start)); break;
    default: s = `<${typeName(type)}, ${end - start} bytes>`;
  }
  return s.length > MAX_VALUE ? `${s.slice(0, MAX_VALUE - 1)}…` : s;
}

class Differ {
  readonly entries: DiffEntry[] = [];
  truncated = false;
  private readonly a: Buffer;
  private readonly b: Buffer;
  private readonly o: DiffOptions;

  constructor(a: Buffer, b: Buffer, o: DiffOptions) {
    this.a = a;
    this.b = b;
    this.o = o;
  }

  private push(e: DiffEntry): boolean {
    if (this.entries.length >= this.o.maxEntries) {
      this.truncated = true;
      return false;
    }
    this.entries.push(e);
    return true;
  }

  /** Compares the documents (or arrays) at `ao` in a and `bo` in b. False: stop (the entry limit). */
  doc(ao: number, bo: number, prefix: string, depth: number): boolean {
    const ea = elements(this.a, ao).filter((e) => !this.o.ignore.has(join(prefix, e.name)));
    const eb = elements(this.b, bo).filter((e) => !this.o.ignore.has(join(prefix, e.name)));
    const byName = new Map<string, Elem>();
    for (const e of eb) byName.set(e.name, e);
    const seen = new Set<string>();
    for (const x of ea) {
      const path = join(prefix, x.name);
      const y = byName.get(x.name);
      if (y === undefined) {
        const e: DiffEntry = { path, change: 'removed', baseline_type: typeName(x.type) };
        if (this.o.showValues) e.baseline = render(this.a, x.type, x.start, x.end);
        if (!this.push(e)) return false;
        continue;
      }
      seen.add(x.name);
      if (!this.value(x, y, path, depth)) return false;
    }
    for (const y of eb) {
      if (seen.has(y.name)) continue;
      const e: DiffEntry = { path: join(prefix, y.name), change: 'added', candidate_type: typeName(y.type) };
      if (this.o.showValues) e.candidate = render(this.b, y.type, y.start, y.end);
      if (!this.push(e)) return false;
    }
    // Same fields, other order: a document's field order can matter to a server (the command
    // name first), so it is a difference of its own — reported once, at the document.
    const common = ea.filter((x) => byName.has(x.name)).map((x) => x.name);
    const commonB = eb.filter((y) => seen.has(y.name)).map((y) => y.name);
    if (common.some((n, i) => commonB[i] !== n)) return this.push({ path: prefix === '' ? '(document)' : prefix, change: 'order' });
    return true;
  }

  private value(x: Elem, y: Elem, path: string, depth: number): boolean {
    if (x.type !== y.type) {
      const e: DiffEntry = { path, change: 'type', baseline_type: typeName(x.type), candidate_type: typeName(y.type) };
      if (this.o.showValues) {
        e.baseline = render(this.a, x.type, x.start, x.end);
        e.candidate = render(this.b, y.type, y.start, y.end);
      }
      return this.push(e);
    }
    if (sameBytes(this.a, x.start, x.end, this.b, y.start, y.end)) return true;
    if ((x.type === 0x03 || x.type === 0x04) && depth < MAX_DEPTH) return this.doc(x.start, y.start, path, depth + 1);
    const e: DiffEntry = { path, change: 'changed', baseline_type: typeName(x.type), candidate_type: typeName(y.type) };
    if (this.o.showValues) {
      e.baseline = render(this.a, x.type, x.start, x.end);
      e.candidate = render(this.b, y.type, y.start, y.end);
    }
    return this.push(e);
  }
}

/**
 * The differences between BSON documents `a` (the baseline's) and `b` (the candidate's); no
 * entries when they are equal (byte for byte, or but for ignored paths). Throws on malformed BSON
 * (the caller counts it as a difference of the whole document).
 */
export function diffBson(a: Uint8Array, b: Uint8Array, o: DiffOptions): DiffResult {
  const ab = asBuffer(a);
  const bb = asBuffer(b);
  if (ab.length === bb.length && ab.equals(bb)) return { entries: [], truncated: false };
  checkDocument(ab, 0, ab.length);
  checkDocument(bb, 0, bb.length);
  const d = new Differ(ab, bb, o);
  d.doc(0, 0, '', 0);
  return { entries: d.entries, truncated: d.truncated };
}
