// Server-side cursors: results held by reference, copied/projected lazily per
// batch. Cursors expire after an idle timeout and the number of open cursors is
// capped (least recently used is evicted). No timers: expiry is swept lazily on
// access so the engine never keeps the event loop alive.
import { calculateObjectSize, Long, type Document } from 'bson';
import { randomBytes } from 'node:crypto';

export interface CursorOptions {
  /** Bytes of one batch array (documents with their array element headers), as mongod's 16 MiB. */
  maxBatchBytes: number;
  idleTimeoutMs: number;
  maxCursors: number;
  now: () => number;
}

interface OpenCursor {
  id: bigint;
  ns: string;
  docs: Document[];
  pos: number;
  map: (d: Document) => Document;
  lastUsed: number;
}

export const DEFAULT_FIRST_BATCH = 101;

export class CursorManager {
  private readonly open = new Map<bigint, OpenCursor>();

  constructor(private readonly opts: CursorOptions) {}

  reset(): void {
    this.open.clear();
  }

  get size(): number {
    this.sweep();
    return this.open.size;
  }

  private sweep(): void {
    const cutoff = this.opts.now() - this.opts.idleTimeoutMs;
    for (const [id, c] of this.open) if (c.lastUsed < cutoff) this.open.delete(id);
  }

  private newId(): bigint {
    for (;;) {
      const b = randomBytes(8);
      b[0] &= 0x7f; // positive
      const id = b.readBigInt64BE(0);
      if (id !== 0n && !this.open.has(id)) return id;
    }
  }

  /**
   * The next documents of `c`: at most `batchSize` (0: no count limit), and — as mongod does — no
   * document that would take the batch array past maxBatchBytes, counting each element as the
   * array encodes it (type byte, index key, NUL, document), so the reply stays within 16 MiB plus
   * its envelope. The first document always goes in, whatever its size.
   */
  private batch(c: OpenCursor, batchSize: number): Document[] {
    const out: Document[] = [];
    let bytes = 0;
    const max = batchSize > 0 ? batchSize : Infinity;
    while (c.pos < c.docs.length && out.length < max) {
      const d = c.map(c.docs[c.pos]);
      const size = elementSize(out.length, calculateObjectSize(d));
      if (out.length > 0 && bytes + size > this.opts.maxBatchBytes) break;
      out.push(d);
      bytes += size;
      c.pos++;
    }
    return out;
  }

  /**
   * Builds the first-batch reply for a result set, registering a cursor when more
   * results remain (unless singleBatch).
   */
  first(
    ns: string,
    docs: Document[],
    opts: { batchSize?: number; singleBatch?: boolean; map?: (d: Document) => Document },
  ): Document {
    this.sweep();
    const c: OpenCursor = {
      id: 0n,
      ns,
      docs,
      pos: 0,
      map: opts.map ?? ((d) => d),
      lastUsed: this.opts.now(),
    };
    const firstBatch = opts.batchSize === 0 ? [] : this.batch(c, opts.batchSize ?? DEFAULT_FIRST_BATCH);
    if (c.pos < docs.length && !opts.singleBatch) {
      c.id = this.newId();
      this.open.set(c.id, c);
      while (this.open.size > this.opts.maxCursors) this.open.delete(this.open.keys().next().value as bigint);
    }
    return { cursor: { firstBatch, id: Long.fromBigInt(c.id), ns }, ok: 1 };
  }

  /** Returns undefined when the cursor does not exist (or has expired). */
  /** Next batch (`nextBatch`); undefined when the cursor does not exist (or has expired). */
  more(id: bigint, batchSize: number): Document | undefined {
    this.sweep();
    const c = this.open.get(id);
    if (!c) return undefined;
    return this.next(c, batchSize);
  }

  peekNs(id: bigint): string | undefined {
    this.sweep();
    return this.open.get(id)?.ns;
  }

  private next(c: OpenCursor, batchSize: number): Document {
    this.open.delete(c.id); // re-insert to keep LRU order
    const nextBatch = this.batch(c, batchSize);
    c.lastUsed = this.opts.now();
    const done = c.pos >= c.docs.length;
    if (!done) this.open.set(c.id, c);
    return { cursor: { nextBatch, id: Long.fromBigInt(done ? 0n : c.id), ns: c.ns }, ok: 1 };
  }

  kill(id: bigint): boolean {
    this.sweep();
    return this.open.delete(id);
  }
}

/** Bytes of a document of `docBytes` at `index` of a BSON array: type byte, decimal key, NUL, document. */
function elementSize(index: number, docBytes: number): number {
  return 2 + (index < 10 ? 1 : Math.floor(Math.log10(index)) + 1) + docBytes;
}

/** Converts a cursor id from the wire (Long, number, bigint, Int32...) to bigint. */
export function cursorIdOf(v: unknown): bigint | undefined {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (Long.isLong(v)) return v.toBigInt();
  if (v && typeof v === 'object' && (v as { _bsontype?: string })._bsontype === 'Int32') return BigInt((v as { value: number }).value);
  return undefined;
}
