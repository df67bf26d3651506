// cache: response cache for reads (find, count, distinct, aggregate without $out/$merge) in the
// host kv store. Key = a 64-bit hash of the normalised command, prefixed with generation counters
// (global epoch, database, namespace) that writes bump, so a write invalidates every entry of
// its collection at once without enumerating them. See ../README.md and docs/steps.md.
//
// The read path (lookup, store) allocates nothing per request but the body copy: the normalised
// command, the kv key (UTF-16, built in place) and the stored entry live in reused buffers, the
// command is walked with one re-pointed BsonValue, and reply status comes from the host's peek.
import { Step, Context, Action, registerStep, log, kv, nowNs, subop, Counter, Gauge } from "../../../sdk/assembly/index";
import { proxy_kv_get, proxy_kv_set, proxy_kv_delete, proxy_reply_local } from "../../../sdk/assembly/host";
import { BsonDoc, BsonValue, BsonType } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { NameSet, classify, pipelineWrites } from "../../_shared/match";

const CACHEABLE: string[] = ["find", "count", "distinct", "aggregate"];

/** kv key changed by every generation bump (see prefixFor). */
const VERSION_KEY = "v";

/** Top-level fields a normalised command can have at most (more: not cached). */
const MAX_FIELDS = 32;

const NOT_CACHEABLE = -1;

class Pending {
  rid: i64 = 0;
  /** Key prefix (generations at request time); null = an invalidation to repeat at the response. */
  prefix: string | null = null;
  hash: u64 = 0;
  /** The normalised command the key was hashed from: stored with the reply, compared on a hit. */
  norm: Uint8Array = new Uint8Array(256);
  normLen: i32 = 0;
  inval: string[] = [];
  commit: bool = false;
}

class Cache extends Step {
  ttlMs: i32 = 60000;
  maxBytes: i64 = 1 << 20;
  maxEntry: i32 = 256 << 10;
  ops: NameSet | null = null;
  pending: Map<i64, Pending> = new Map<i64, Pending>();
  spare: Pending[] = [];
  // FIFO ledger of stored entries (all share one TTL, so insertion order is expiry order); an
  // entry's kv key is rebuilt from its prefix and hash when it must be removed.
  lPrefix: Array<string | null> = [];
  lHash: u64[] = [];
  lBytes: i32[] = [];
  lExp: i64[] = [];
  lHead: i32 = 0;
  used: i64 = 0;
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
  /** The op string whose classification is cached (same identity trick). */
  lastOp: string | null = null;
  lastOpKind: i32 = 0;
  genSeq: i32 = 0;
  // Reused buffers: field table of the command walk, normalised command, UTF-16 key, kv entry.
  fPtr: StaticArray<u32> = new StaticArray<u32>(MAX_FIELDS);
  fLen: StaticArray<i32> = new StaticArray<i32>(MAX_FIELDS);
  fName: StaticArray<u32> = new StaticArray<u32>(MAX_FIELDS);
  fNameLen: StaticArray<i32> = new StaticArray<i32>(MAX_FIELDS);
  norm: Uint8Array = new Uint8Array(1024);
  normLen: i32 = 0;
  keyBuf: Uint8Array = new Uint8Array(512);
  keyLen: i32 = 0;
  entry: Uint8Array = new Uint8Array(4096);
  /** The command / reply, copied here instead of a fresh array per call. */
  bodyBuf: Uint8Array = new Uint8Array(4096);
  cur: BsonValue = new BsonValue();
  inner: BsonValue = new BsonValue();
  hits: Counter | null = null;
  misses: Counter | null = null;
  stores: Counter | null = null;
  invalidations: Counter | null = null;
  bytes: Gauge | null = null;

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    const root = c.root;
    c.keys(root, ["ttl_ms", "max_bytes", "max_entry_bytes", "ops"], "");
    const ttl = c.num(root, "ttl_ms", 60000, "");
    if (!(ttl >= 1 && ttl <= 2147483647) || Math.floor(ttl) != ttl) c.fail("ttl_ms must be an integer between 1 and 2147483647");
    const maxBytes = c.num(root, "max_bytes", 1048576, "");
    if (!(maxBytes >= 1024) || Math.floor(maxBytes) != maxBytes) c.fail("max_bytes must be an integer >= 1024");
    const maxEntry = c.num(root, "max_entry_bytes", Math.min(262144, maxBytes), "");
    if (!(maxEntry >= 16) || maxEntry > maxBytes || Math.floor(maxEntry) != maxEntry) c.fail("max_entry_bytes must be an integer between 16 and max_bytes");
    const ops = c.strList(root, "ops", "");
    if (ops !== null) for (let i = 0; i < ops.length; i++) if (!CACHEABLE.includes(ops[i])) c.fail("ops: \"" + ops[i] + "\" is not cacheable (" + CACHEABLE.join(", ") + ")");
    if (!c.ok) { log.error("cache: bad config: " + c.error); return false; }
    this.ttlMs = <i32>ttl;
    this.maxBytes = <i64>maxBytes;
    this.maxEntry = <i32>maxEntry;
    this.ops = NameSet.of(ops === null ? CACHEABLE : ops);
    this.hits = new Counter("proxy_plugin_cache_hits_total");
    this.misses = new Counter("proxy_plugin_cache_misses_total");
    this.stores = new Counter("proxy_plugin_cache_stores_total");
    this.invalidations = new Counter("proxy_plugin_cache_invalidations_total");
    this.bytes = new Gauge("proxy_plugin_cache_bytes");
    return true;
  }

  /** 0 neutral/other read, 1 cacheable read op, 2 write, 3 aggregate (decided per command). */
  opKind(op: string): i32 {
    if (this.lastOp !== null && changetype<usize>(this.lastOp) == changetype<usize>(op)) return this.lastOpKind;
    let k: i32;
    if (op == "aggregate") k = 3;
    else {
      const c = classify(op, null);
      k = c == "write" ? 2 : this.ops!.has(op) ? 1 : 0;
    }
    this.lastOp = op;
    this.lastOpKind = k;
    return k;
  }

  onRequest(ctx: Context): Action {
    const op = ctx.op;
    if (op == "commitTransaction") { this.remember(ctx, null, 0, [], true); return Action.Continue; }
    const kind = this.opKind(op);
    if (kind == 0) return Action.Continue;
    if (kind == 3 || kind == 2) return this.writeOrAggregate(ctx, op, kind);
    const n = this.readBody(ctx);
    if (n < 0) return Action.Continue;
    return this.lookup(ctx, n);
  }

  /** The current body into bodyBuf (grown when needed); its size, -1 when there is none. */
  readBody(ctx: Context): i32 {
    let n = ctx.bodyInto(this.bodyBuf);
    if (n > this.bodyBuf.length) {
      this.bodyBuf = new Uint8Array(n + 1024);
      n = ctx.bodyInto(this.bodyBuf);
    }
    return n;
  }

  writeOrAggregate(ctx: Context, op: string, kind: i32): Action {
    const body = ctx.body();
    if (kind == 3) {
      const cmd = BsonDoc.fromBytes(body);
      if (cmd === null) return Action.Continue;
      if (pipelineWrites(cmd)) kind = 2;
      else if (!this.ops!.has(op)) return Action.Continue;
    }
    if (kind == 2) {
      const cmd = BsonDoc.fromBytes(body);
      if (cmd === null) return Action.Continue;
      const targets = this.targets(ctx, cmd);
      this.invalidate(targets);
      this.remember(ctx, null, 0, targets, false);
      return Action.Continue;
    }
    // a read aggregate
    const size = body.length;
    if (this.bodyBuf.length < size) this.bodyBuf = new Uint8Array(size + 1024);
    memory.copy(this.bodyBuf.dataStart, body.dataStart, size);
    return this.lookup(ctx, size);
  }

  /** Looks the command in bodyBuf[0, size) up; a hit answers locally. */
  lookup(ctx: Context, size: i32): Action {
    const s = subop("cache.lookup");
    const n = this.normalise(this.bodyBuf, size);
    if (n == NOT_CACHEABLE) { s.end(); return Action.Continue; }
    const hash = hash64(this.norm.dataStart, n);
    const prefix = this.prefixFor(ctx.db, ctx.collection);
    this.buildKey(prefix, hash);
    const entry = this.fetch();
    s.end();
    // An entry is [u32 length of the normalised command][normalised command][reply]. The key is a
    // 64-bit hash, so a hit counts only when the stored command is byte-for-byte this one.
    if (entry >= 4) {
      const e = this.entry.dataStart;
      const m = load<u32>(e);
      if (<i32>m == n && <i32>m + 4 <= entry && memory.compare(e + 4, this.norm.dataStart, n) == 0) {
        this.hits!.inc();
        proxy_reply_local(e + 4 + <usize>m, entry - 4 - <i32>m);
        return Action.Stop;
      }
    }
    this.misses!.inc();
    this.remember(ctx, prefix, hash, [], false);
    return Action.Continue;
  }

  onResponse(ctx: Context): Action {
    if (this.pending.size == 0) return Action.Continue;
    const conn = ctx.connectionId;
    if (!this.pending.has(conn)) return Action.Continue;
    const p = this.pending.get(conn);
    this.pending.delete(conn);
    this.spare.push(p);
    if (p.rid != ctx.requestId || ctx.isLocalReply) return Action.Continue;
    if (p.commit) {
      if (ctx.replyOk == 1) this.bump("x", "epoch");
      return Action.Continue;
    }
    const prefix = p.prefix;
    if (prefix === null) { this.invalidate(p.inval); return Action.Continue; }
    if (ctx.replyOk != 1) return Action.Continue;
    const s = subop("cache.store");
    const size = this.readBody(ctx);
    const n = size < 0 ? 0 : this.buildEntry(this.bodyBuf, size, p);
    if (n > 0) this.store(prefix, p.hash, n);
    s.end();
    return Action.Continue;
  }

  remember(ctx: Context, prefix: string | null, hash: u64, inval: string[], commit: bool): void {
    const p = this.spare.length > 0 ? this.spare.pop() : new Pending();
    p.rid = ctx.requestId; p.prefix = prefix; p.hash = hash; p.inval = inval; p.commit = commit;
    if (prefix !== null) {
      const n = this.normLen;
      if (p.norm.length < n) p.norm = new Uint8Array(n);
      memory.copy(p.norm.dataStart, this.norm.dataStart, n);
      p.normLen = n;
    }
    if (this.pending.size > 65536) this.pending.clear();
    this.pending.set(ctx.connectionId, p);
  }

  /** kv keys of the generation counters a write must bump ("d:<db>" or "n:<db>.<coll>"). */
  targets(ctx: Context, cmd: BsonDoc): string[] {
    const out = new Array<string>();
    const op = ctx.op;
    const db = ctx.db;
    if (op == "dropDatabase") { out.push("d:" + db); return out; }
    if (op == "renameCollection") {
      const from = cmd.get("renameCollection");
      const to = cmd.get("to");
      if (from !== null && from.type == BsonType.STRING) out.push("n:" + from.asString());
      if (to !== null && to.type == BsonType.STRING) out.push("n:" + to.asString());
      return out;
    }
    if (op == "bulkWrite") {
      const ns = cmd.get("nsInfo");
      if (ns !== null && ns.type == BsonType.ARRAY) {
        const it = ns.asArray().iter();
        while (it.next()) {
          if (it.value.type != BsonType.DOCUMENT) continue;
          const n = it.value.asDoc().get("ns");
          if (n !== null && n.type == BsonType.STRING) out.push("n:" + n.asString());
        }
      }
      return out;
    }
    if (op == "aggregate" && pipelineWrites(cmd)) {
      // $out / $merge target: a string is a collection of this database; a document may name
      // another database — bump that whole database (coarse, safe).
      const p = cmd.get("pipeline")!.asArray();
      const it = p.iter();
      while (it.next()) {
        if (it.value.type != BsonType.DOCUMENT) continue;
        const st = it.value.asDoc().firstElement();
        if (st === null) continue;
        let tgt: BsonValue | null = null;
        if (st.nameEquals("$out")) tgt = st;
        else if (st.nameEquals("$merge")) tgt = st.type == BsonType.DOCUMENT ? st.asDoc().get("into") : st;
        if (tgt === null) continue;
        if (tgt.type == BsonType.STRING) out.push("n:" + db + "." + tgt.asString());
        else if (tgt.type == BsonType.DOCUMENT) {
          const d = tgt.asDoc().get("db");
          out.push("d:" + (d !== null && d.type == BsonType.STRING ? d.asString() : db));
        }
      }
      return out;
    }
    if (op == "mapReduce") { out.push("d:" + db); return out; }
    const coll = ctx.collection;
    out.push(coll.length > 0 ? "n:" + db + "." + coll : "d:" + db);
    return out;
  }

  invalidate(targets: string[]): void {
    for (let i = 0; i < targets.length; i++) this.bump(targets[i], targets[i]);
  }

  /** Gives generation counter `key` a fresh value (never reused, so old entries become unreachable). */
  bump(_what: string, key: string): void {
    this.invalidations!.inc();
    this.genSeq++;
    const v = nowNs().toString(36) + "." + this.genSeq.toString(36);
    // The counter itself, then the version every lookup checks first (see prefixFor).
    if (!this.setGen(key, v) || !this.setGen(VERSION_KEY, v)) {
      // nothing left to evict and still no room: invalidate everything this instance serves
      this.localEpoch++;
      log.warn("cache: kv store full, could not record invalidation of " + key + "; flushed the whole cache");
    }
  }

  setGen(key: string, v: string): bool {
    while (!kv.setString(key, v, 0)) if (!this.evictOne()) return false;
    return true;
  }

  gen(key: string): string {
    const g = kv.getString(key);
    return g === null ? "0" : g;
  }

  /** Writes the command's cache identity into `norm`: the database, a NUL, the command element,
   *  then every other top-level element except those that do not change the result (sessions,
   *  gossip, routing, transactions), sorted by name so field order does not matter. Returns its
   *  length, or NOT_CACHEABLE (inside a transaction, tailable, malformed, too many fields). */
  normalise(body: Uint8Array, size: i32): i32 {
    if (size < 5 || load<i32>(body.dataStart) != size) return NOT_CACHEABLE;
    const start = body.dataStart;
    const end = start + <usize>size - 1;
    const cur = this.cur;
    let p = start + 4;
    let count = 0;
    let total = 0;
    let dbPtr: usize = 0;
    let dbLen = -1;
    while (p < end) {
      if (!cur.parseAt(p, end, body)) return NOT_CACHEABLE;
      p = cur.nextPtr;
      const np = cur.namePtr;
      const nl = cur.nameLength;
      if (count > 0) {
        const c = classifyField(np, nl);
        if (c == F_TXN) return NOT_CACHEABLE;
        if (c == F_TAILABLE) { if (cur.type == BsonType.BOOL && load<u8>(cur.valuePtr) != 0) return NOT_CACHEABLE; }
        else if (c == F_DB) { if (cur.type == BsonType.STRING) { dbPtr = cur.valuePtr + 4; dbLen = load<i32>(cur.valuePtr) - 1; } continue; }
        else if (c == F_IGNORED) continue;
      }
      if (count == MAX_FIELDS) return NOT_CACHEABLE;
      // insertion sort by name (the command element stays first)
      let j = count;
      if (count > 0) while (j > 1 && nameLess(np, nl, unchecked(this.fName[j - 1]), unchecked(this.fNameLen[j - 1]))) {
        unchecked(this.fPtr[j] = this.fPtr[j - 1]); unchecked(this.fLen[j] = this.fLen[j - 1]);
        unchecked(this.fName[j] = this.fName[j - 1]); unchecked(this.fNameLen[j] = this.fNameLen[j - 1]);
        j--;
      }
      const len = cur.elementLength;
      unchecked(this.fPtr[j] = <u32>cur.elementPtr); unchecked(this.fLen[j] = len);
      unchecked(this.fName[j] = <u32>np); unchecked(this.fNameLen[j] = nl);
      count++;
      total += len;
    }
    if (dbLen < 0) return NOT_CACHEABLE;
    const normSize = dbLen + 1 + total;
    if (this.norm.length < normSize) this.norm = new Uint8Array(normSize + 256);
    let out = this.norm.dataStart;
    memory.copy(out, dbPtr, dbLen);
    out += <usize>dbLen;
    store<u8>(out++, 0);
    for (let i = 0; i < count; i++) {
      const l = unchecked(this.fLen[i]);
      memory.copy(out, <usize>unchecked(this.fPtr[i]), l);
      out += <usize>l;
    }
    this.normLen = normSize;
    return normSize;
  }

  /** "e:<local epoch>.<global gen>:<db gen>:<namespace gen>:". Every bump (in any instance: the
   *  kv store is shared) also changes VERSION_KEY, so while it is unchanged the prefixes computed
   *  before are still exact: a lookup then costs one kv read instead of three. */
  prefixFor(db: string, coll: string): string {
    const buf = this.entry;
    const v = proxy_kv_get(changetype<usize>(VERSION_KEY), VERSION_KEY.length << 1, buf.dataStart, buf.length);
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
    if (last !== null && changetype<usize>(db) == changetype<usize>(this.lastDb) && changetype<usize>(coll) == changetype<usize>(this.lastColl)) return last;
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

  /** The kv key `prefix` + 16 hex digits of `hash`, as UTF-16 in keyBuf. */
  buildKey(prefix: string, hash: u64): void {
    const pl = prefix.length << 1;
    const need = pl + 32;
    if (this.keyBuf.length < need) this.keyBuf = new Uint8Array(need + 64);
    const k = this.keyBuf.dataStart;
    memory.copy(k, changetype<usize>(prefix), pl);
    let q = k + <usize>pl;
    for (let i = 60; i >= 0; i -= 4) {
      const d = <u32>((hash >> <u64>i) & 15);
      store<u16>(q, <u16>(d < 10 ? 0x30 + d : 0x57 + d));
      q += 2;
    }
    this.keyLen = need;
  }

  /** kv value of keyBuf into `entry` (grown when larger); its length, or -1 when absent. */
  fetch(): i32 {
    let n = proxy_kv_get(this.keyBuf.dataStart, this.keyLen, this.entry.dataStart, this.entry.length);
    if (n > this.entry.length) {
      this.entry = new Uint8Array(n);
      n = proxy_kv_get(this.keyBuf.dataStart, this.keyLen, this.entry.dataStart, n);
    }
    return n;
  }

  /** [u32 norm length][norm][reply without $clusterTime and operationTime] into `entry`; its
   *  length, or 0 when the reply must not be cached (open cursor, too big, malformed). */
  buildEntry(reply: Uint8Array, size: i32, p: Pending): i32 {
    if (size < 5 || load<i32>(reply.dataStart) != size) return 0;
    const start = reply.dataStart;
    const end = start + <usize>size - 1;
    const n = p.normLen;
    const need = 4 + n + size;
    if (size > this.maxEntry + 64) return 0;
    if (this.entry.length < need) this.entry = new Uint8Array(need + 1024);
    const e = this.entry.dataStart;
    store<u32>(e, <u32>n);
    memory.copy(e + 4, p.norm.dataStart, n);
    const docStart = e + 4 + <usize>n;
    let out = docStart + 4;
    const cur = this.cur;
    let q = start + 4;
    while (q < end) {
      if (!cur.parseAt(q, end, reply)) return 0;
      q = cur.nextPtr;
      const nl = cur.nameLength;
      if ((nl == 12 && cur.nameEquals("$clusterTime")) || (nl == 13 && cur.nameEquals("operationTime"))) continue;
      if (nl == 6 && cur.type == BsonType.DOCUMENT && cur.nameEquals("cursor") && !cursorDone(cur, this.inner)) return 0;
      const len = cur.elementLength;
      memory.copy(out, cur.elementPtr, len);
      out += <usize>len;
    }
    store<u8>(out++, 0);
    const docLen = <i32>(out - docStart);
    if (docLen > this.maxEntry) return 0;
    store<i32>(docStart, docLen);
    return <i32>(out - e);
  }

  /** Stores entry[0, len) under prefix + hash, evicting the oldest entries to stay in max_bytes. */
  store(prefix: string, hash: u64, len: i32): void {
    const now = nowNs();
    // drop ledger entries that have expired in the host store
    while (this.lHead < this.lPrefix.length && unchecked(this.lExp[this.lHead]) <= now) this.dropHead(false);
    const size = ((prefix.length + 16) << 1) + len;
    while (this.used + size > this.maxBytes && this.evictOne()) {}
    if (this.used + size > this.maxBytes) return;
    for (;;) {
      this.buildKey(prefix, hash); // (evictOne reuses keyBuf)
      if (proxy_kv_set(this.keyBuf.dataStart, this.keyLen, this.entry.dataStart, len, this.ttlMs) == 0) break;
      if (!this.evictOne()) return; // host cap (kv_max_bytes) reached: skip
    }
    this.lPrefix.push(prefix);
    this.lHash.push(hash);
    this.lBytes.push(size);
    this.lExp.push(now + <i64>this.ttlMs * 1000000);
    this.used += size;
    this.stores!.inc();
    this.bytes!.set(<f64>this.used);
    if (this.lHead > 1024 && this.lHead * 2 > this.lPrefix.length) this.compact();
  }

  evictOne(): bool {
    if (this.lHead >= this.lPrefix.length) return false;
    this.dropHead(true);
    return true;
  }

  dropHead(remove: bool): void {
    const i = this.lHead;
    if (remove) {
      this.buildKey(this.lPrefix[i]!, this.lHash[i]);
      proxy_kv_delete(this.keyBuf.dataStart, this.keyLen);
    }
    this.used -= this.lBytes[i];
    this.lPrefix[i] = null;
    this.lHead++;
    if (remove) this.bytes!.set(<f64>this.used);
  }

  compact(): void {
    this.lPrefix = this.lPrefix.slice(this.lHead);
    this.lHash = this.lHash.slice(this.lHead);
    this.lBytes = this.lBytes.slice(this.lHead);
    this.lExp = this.lExp.slice(this.lHead);
    this.lHead = 0;
  }
}

const F_OTHER = 0;
const F_IGNORED = 1;
const F_TXN = 2;
const F_TAILABLE = 3;
const F_DB = 4;

/** What a top-level field means for caching, from its UTF-8 name (no allocation). */
function classifyField(p: usize, n: i32): i32 {
  switch (n) {
    case 3: if (utf8Is(p, n, "$db")) return F_DB; break;
    case 4: if (utf8Is(p, n, "lsid")) return F_IGNORED; break;
    case 8: if (utf8Is(p, n, "tailable")) return F_TAILABLE; break;
    case 9: if (utf8Is(p, n, "txnNumber") || utf8Is(p, n, "signature")) return F_IGNORED; break;
    case 10: if (utf8Is(p, n, "autocommit")) return F_TXN; break;
    case 11: if (utf8Is(p, n, "readConcern")) return F_IGNORED; break;
    case 12: if (utf8Is(p, n, "$clusterTime")) return F_IGNORED; break;
    case 15: if (utf8Is(p, n, "$readPreference")) return F_IGNORED; break;
    case 16: if (utf8Is(p, n, "startTransaction")) return F_TXN; break;
  }
  return F_OTHER;
}

/** ASCII name at p (n bytes) equals s. */
function utf8Is(p: usize, n: i32, s: string): bool {
  if (s.length != n) return false;
  const q = changetype<usize>(s);
  for (let i = 0; i < n; i++) if (<u32>load<u8>(p + <usize>i) != <u32>load<u16>(q + (<usize>i << 1))) return false;
  return true;
}

/** Byte order of two names. */
function nameLess(a: usize, al: i32, b: usize, bl: i32): bool {
  const c = memory.compare(a, b, al < bl ? al : bl);
  return c < 0 || (c == 0 && al < bl);
}

/** A `cursor` sub-document whose `id` is 0 (the result is complete). */
function cursorDone(cur: BsonValue, inner: BsonValue): bool {
  const start = cur.valuePtr;
  const end = start + <usize>cur.valueLength - 1;
  let q = start + 4;
  while (q < end) {
    if (!inner.parseAt(q, end, cur.owner)) return false;
    q = inner.nextPtr;
    if (!inner.nameEquals("id")) continue;
    if (inner.type == BsonType.INT64) return load<i64>(inner.valuePtr) == 0;
    if (inner.type == BsonType.INT32) return load<i32>(inner.valuePtr) == 0;
    if (inner.type == BsonType.DOUBLE) return load<f64>(inner.valuePtr) == 0;
    return false;
  }
  return true;
}

registerStep(new Cache());
export * from "../../../sdk/assembly/exports";

/** A fast 64-bit hash (multiply-xorshift over 8-byte words), not cryptographic. */
function hash64(ptr: usize, len: i32): u64 {
  const K: u64 = 0x9e3779b97f4a7c15;
  let h: u64 = 0xcbf29ce484222325 ^ (<u64>len * K);
  let i = 0;
  for (; i + 8 <= len; i += 8) {
    h = (h ^ load<u64>(ptr + <usize>i)) * K;
    h ^= h >> 29;
  }
  let tail: u64 = 0;
  for (let j = 0; i + j < len; j++) tail |= (<u64>load<u8>(ptr + <usize>(i + j))) << (<u64>(j * 8));
  h = (h ^ tail) * K;
  h ^= h >> 32;
  h *= 0xff51afd7ed558ccd;
  h ^= h >> 33;
  return h;
}
