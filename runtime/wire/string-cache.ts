// Decoded strings of short byte runs, handed out again when the same bytes come back: a command's
// name, its `$db` and its collection are the same few strings request after request, and decoding
// them afresh made three new strings per request: garbage for the young generation, and, for the
// requests whose flame-graph frames the profiler keeps, strings its ring held into the old one.
// Handing out the same strings: 1.5 % less CPU per request at 5,000 req/s (bench/RESULTS.md).
//
// A direct-mapped table: a run of bytes hashes to one slot, and the slot holds the last string
// decoded there with its bytes. Same bytes: the slot's string, nothing allocated. Other bytes (a
// miss, or another run hashing to the slot): decoded, and the slot takes it. Memory is fixed
// (SLOTS × MAX_BYTES bytes of copies plus the strings), whatever clients send; a client cycling
// through many names costs what decoding always did. Runs longer than MAX_BYTES are not cached.

/** Slots of the table (a power of two). */
const SLOTS = 256;
/** Longest run of bytes cached. */
const MAX_BYTES = 64;

export class StringCache {
  private readonly strings: string[] = new Array<string>(SLOTS).fill('');
  /** Each slot's bytes, MAX_BYTES apart. */
  private readonly bytes = new Uint8Array(SLOTS * MAX_BYTES);
  /** Each slot's byte length; -1: empty. */
  private readonly lengths = new Int32Array(SLOTS).fill(-1);
  /** Runs decoded, whether or not they were then cached (tests read it). */
  decoded = 0;

  /** The UTF-8 bytes `buf[start, end)` as a string: the same string object for the same bytes while the slot keeps them. */
  get(buf: Buffer, start: number, end: number): string {
    const n = end - start;
    if (n > MAX_BYTES) return this.decode(buf, start, end);
    // FNV-1a over the bytes.
    let h = 0x811c9dc5;
    for (let i = start; i < end; i++) h = Math.imul(h ^ buf[i]!, 0x01000193);
    const slot = (h ^ (h >>> 16)) & (SLOTS - 1);
    const at = slot * MAX_BYTES;
    const bytes = this.bytes;
    if (this.lengths[slot] === n) {
      let i = 0;
      while (i < n && bytes[at + i] === buf[start + i]) i++;
      if (i === n) return this.strings[slot]!;
    }
    const s = this.decode(buf, start, end);
    bytes.set(buf.subarray(start, end), at);
    this.lengths[slot] = n;
    this.strings[slot] = s;
    return s;
  }

  private decode(buf: Buffer, start: number, end: number): string {
    this.decoded++;
    return buf.toString('utf8', start, end);
  }
}
