// Invalidation by generation: every kv key starts with a prefix made of generation counters
// (global epoch, database, namespace) kept in the kv store itself. A write gives its counters
// fresh values, so every entry stored under the old ones becomes unreachable at once, without
// enumerating them; they leave by TTL or eviction.
//
// A counter is never read as a default: one that is missing (never set, or evicted from a full
// store, which drops least recently used keys) is given a fresh value when read. Defaulting it
// would let an evicted counter bring back the prefix it had before its last bump, and with it
// entries stored before that write: stale hits. A fresh value costs at worst spurious misses.
import { log, kv, nowNs, Counter } from "../../../sdk/assembly/index";
import { Ledger } from "./ledger";
import { KvKey } from "./key";

/** kv key changed by every generation bump (see prefixFor). */
const VERSION_KEY = "v";

export class Generations {
  localEpoch: i32 = 0;
  /** Key prefixes by namespace, valid while VERSION_KEY and localEpoch are unchanged. */
  prefixes: Map<string, string> = new Map<string, string>();
  seenVersion: Uint8Array = new Uint8Array(64);
  seenVersionLen: i32 = -2;
  seenEpoch: i32 = -1;
  /** The db / collection strings the last prefix was computed for (the SDK hands out the same
   *  string objects while the namespace repeats, so identity is the cheap check). */
  lastDb: string | null = null;
  lastColl: string | null = null;
  lastPrefix: string | null = null;
  genSeq: i32 = 0;
  /** VERSION_KEY is read into this buffer on every lookup. */
  scratch: Uint8Array = new Uint8Array(4096);
  invalidations: Counter | null = null;
  /** Evicts this instance's entries when the host refuses a counter (see setGen). */
  ledger: Ledger;
  key: KvKey;

  constructor(ledger: Ledger, key: KvKey) {
    this.ledger = ledger;
    this.key = key;
  }

  invalidate(targets: string[]): void {
    for (let i = 0; i < targets.length; i++) this.bump(targets[i]);
  }

  /** Gives generation counter `name` a fresh value (never reused, so old entries become unreachable). */
  bump(name: string): void {
    this.invalidations!.inc();
    const v = this.fresh();
    // The counter itself, then the version every lookup checks first (see prefixFor).
    if (!this.setGen(name, v) || !this.setGen(VERSION_KEY, v)) {
      // nothing left to evict and still no room: invalidate everything this instance serves
      this.localEpoch++;
      log.warn("cache: kv store full, could not record invalidation of " + name + "; flushed the whole cache");
    }
  }

  /** A generation value never used before (clock + sequence). */
  fresh(): string {
    this.genSeq++;
    return nowNs().toString(36) + "." + this.genSeq.toString(36);
  }

  setGen(name: string, v: string): bool {
    while (!kv.setString(name, v, 0)) if (!this.ledger.evictOne(this.key)) return false;
    return true;
  }

  /** The counter's value; a missing one gets a fresh value (see the top of this file). */
  gen(name: string): string {
    const g = kv.getString(name);
    if (g !== null) return g;
    const v = this.fresh();
    this.setGen(name, v); // if even that fails, the next computation gets another fresh value
    return v;
  }

  /** "e:<local epoch>.<global gen>:<db gen>:<namespace gen>:". Every bump (in any instance: the
   *  kv store is shared) also changes VERSION_KEY, so while it is unchanged the prefixes computed
   *  before are still exact: a lookup then costs one kv read instead of three. */
  prefixFor(db: string, coll: string): string {
    const buf = this.scratch;
    const v = kv.getInto(VERSION_KEY, buf);
    const n = v < 0 ? -1 : v;
    if (n != this.seenVersionLen || (n > 0 && (n > this.seenVersion.length || memory.compare(buf.dataStart, this.seenVersion.dataStart, n) != 0)) || this.seenEpoch != this.localEpoch) {
      if (n > this.seenVersion.length) this.seenVersion = new Uint8Array(n);
      if (n > 0) memory.copy(this.seenVersion.dataStart, buf.dataStart, n);
      this.seenVersionLen = n;
      this.seenEpoch = this.localEpoch;
      this.prefixes.clear();
      this.lastPrefix = null;
    }
    const last = this.lastPrefix;
    if (changetype<usize>(last) != 0 && changetype<usize>(db) == changetype<usize>(this.lastDb) && changetype<usize>(coll) == changetype<usize>(this.lastColl)) return changetype<string>(last);
    const ns = db + "." + coll;
    let pfx: string;
    if (this.prefixes.has(ns)) pfx = this.prefixes.get(ns);
    else {
      pfx = "e:" + this.localEpoch.toString() + "." + this.gen("epoch") + ":" + this.gen("d:" + db) + ":" + this.gen("n:" + ns) + ":";
      if (this.prefixes.size >= 4096) this.prefixes.clear();
      this.prefixes.set(ns, pfx);
    }
    this.lastDb = db;
    this.lastColl = coll;
    this.lastPrefix = pfx;
    return pfx;
  }
}
