// cache: response cache for reads (find, count, distinct, aggregate without $out/$merge) in the
// host kv store. Key = sha256 of the normalised command, prefixed with generation counters
// (global epoch, database, namespace) that writes bump, so a write invalidates every entry of
// its collection at once without enumerating them. See ../README.md and docs/steps.md.
import { Step, Context, Action, registerStep, log, kv, nowNs, subop, Counter, Gauge } from "../../../sdk/assembly/index";
import { BsonDoc, BsonValue, BsonType, unset } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { NameSet, classify, pipelineWrites } from "../../_shared/match";

/** Top-level fields that do not change the result (sessions, gossip, routing, transactions). */
const IGNORED: string[] = ["lsid", "$clusterTime", "$db", "txnNumber", "$readPreference", "readConcern", "signature", "autocommit", "startTransaction"];
const CACHEABLE: string[] = ["find", "count", "distinct", "aggregate"];

/** kv key changed by every generation bump (see prefixOf). */
const VERSION_KEY = "v";

class Pending {
  rid: i64 = 0;
  key: string = "";   // "" = an invalidation to repeat at the response phase
  /** The normalised command the key was hashed from: stored with the reply, compared on a hit. */
  norm: Uint8Array = new Uint8Array(0);
  inval: string[] = [];
  commit: bool = false;
}

class Cache extends Step {
  ttlMs: i32 = 60000;
  maxBytes: i64 = 1 << 20;
  maxEntry: i32 = 256 << 10;
  ops: NameSet | null = null;
  pending: Map<i64, Pending> = new Map<i64, Pending>();
  // FIFO ledger of stored entries (all share one TTL, so insertion order is expiry order)
  lKeys: string[] = [];
  lBytes: i32[] = [];
  lExp: i64[] = [];
  lHead: i32 = 0;
  used: i64 = 0;
  localEpoch: i32 = 0;
  /** Key prefixes by namespace, valid while VERSION_KEY and localEpoch are unchanged. */
  prefixes: Map<string, string> = new Map<string, string>();
  seenVersion: string = "";
  seenEpoch: i32 = -1;
  genSeq: i32 = 0;
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

  onRequest(ctx: Context): Action {
    const op = ctx.op;
    const cmd = BsonDoc.fromBytes(ctx.body());
    if (cmd === null) return Action.Continue;
    if (op == "commitTransaction") { this.remember(ctx, "", [], true); return Action.Continue; }
    const kind = classify(op, cmd);
    if (kind == "write") {
      const targets = this.targets(ctx, cmd);
      this.invalidate(targets);
      this.remember(ctx, "", targets, false);
      return Action.Continue;
    }
    if (!this.ops!.has(op)) return Action.Continue;
    if (cmd.get("autocommit") !== null || cmd.get("startTransaction") !== null) return Action.Continue;
    const tail = cmd.get("tailable");
    if (tail !== null && tail.type == BsonType.BOOL && tail.asBool()) return Action.Continue;

    const s = subop("cache.lookup");
    const norm = this.normalise(ctx, cmd);
    const key = this.keyOf(ctx, norm);
    const hit = kv.get(key);
    s.end();
    // An entry is [u32 length of the normalised command][normalised command][reply]. The key is a
    // 64-bit hash, so a hit counts only when the stored command is byte-for-byte this one.
    if (hit !== null && hit.length >= 4) {
      const n = load<u32>(hit.dataStart);
      if (<i32>n == norm.length && <i32>n + 4 <= hit.length && memory.compare(hit.dataStart + 4, norm.dataStart, n) == 0) {
        this.hits!.inc();
        return ctx.replyLocal(hit.subarray(4 + <i32>n));
      }
    }
    this.misses!.inc();
    this.remember(ctx, key, [], false);
    this.pending.get(ctx.connectionId).norm = norm;
    return Action.Continue;
  }

  onResponse(ctx: Context): Action {
    const conn = ctx.connectionId;
    if (!this.pending.has(conn)) return Action.Continue;
    const p = this.pending.get(conn);
    this.pending.delete(conn);
    if (p.rid != ctx.requestId || ctx.isLocalReply) return Action.Continue;
    if (p.commit) {
      if (replyOk(BsonDoc.fromBytes(ctx.body()))) this.bump("x", "epoch");
      return Action.Continue;
    }
    if (p.key.length == 0) { this.invalidate(p.inval); return Action.Continue; }
    const body = ctx.body();
    const reply = BsonDoc.fromBytes(body);
    if (!replyOk(reply)) return Action.Continue;
    const cur = reply!.get("cursor");
    if (cur !== null) {
      if (cur.type != BsonType.DOCUMENT) return Action.Continue;
      const id = cur.asDoc().get("id");
      if (id === null || !id.isNumber() || id.asNumber() != 0) return Action.Continue; // more batches: not complete
    }
    const s = subop("cache.store");
    let bytes: Uint8Array = body;
    if (reply!.get("$clusterTime") !== null) { const u = unset(reply!, "$clusterTime"); if (u !== null) bytes = u; }
    const r2 = BsonDoc.fromBytes(bytes);
    if (r2 !== null && r2.get("operationTime") !== null) { const u = unset(r2, "operationTime"); if (u !== null) bytes = u; }
    if (bytes.length <= this.maxEntry) {
      const n = p.norm.length;
      const entry = new Uint8Array(4 + n + bytes.length);
      store<u32>(entry.dataStart, <u32>n);
      memory.copy(entry.dataStart + 4, p.norm.dataStart, n);
      memory.copy(entry.dataStart + 4 + <usize>n, bytes.dataStart, bytes.length);
      this.store(p.key, entry);
    }
    s.end();
    return Action.Continue;
  }

  remember(ctx: Context, key: string, inval: string[], commit: bool): void {
    const p = new Pending();
    p.rid = ctx.requestId; p.key = key; p.inval = inval; p.commit = commit;
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
    // The counter itself, then the version every lookup checks first (see keyOf).
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

  /** The command as cache identity: the database, then the command element, then every other
   *  top-level element except IGNORED ones, sorted by name (field order does not matter). */
  normalise(ctx: Context, cmd: BsonDoc): Uint8Array {
    const db = ctx.db;
    const els = new Array<BsonValue>();
    const names = new Array<string>();
    let first = true;
    let total = 0;
    const it = cmd.iter();
    while (it.next()) {
      const v = it.value;
      const name = v.name;
      if (!first && IGNORED.includes(name)) continue;
      const copy = BsonValue.parse(v.elementPtr, v.parentEnd, v.owner)!;
      if (first) { els.push(copy); names.push(""); first = false; }
      else {
        // insertion sort (commands have few top-level fields)
        els.push(copy); names.push(name);
        let j = els.length - 1;
        while (j > 1 && names[j - 1] > name) {
          els[j] = els[j - 1]; names[j] = names[j - 1];
          j--;
        }
        els[j] = copy; names[j] = name;
      }
      total += copy.elementLength;
    }
    const dbBytes = String.UTF8.encode(db);
    const buf = new Uint8Array(dbBytes.byteLength + 1 + total);
    memory.copy(buf.dataStart, changetype<usize>(dbBytes), dbBytes.byteLength);
    let off = dbBytes.byteLength + 1;
    for (let i = 0; i < els.length; i++) {
      const e = els[i];
      memory.copy(buf.dataStart + off, e.elementPtr, e.elementLength);
      off += e.elementLength;
    }
    return buf;
  }

  /** kv key: generation counters (so writes make older entries unreachable) + a 64-bit hash of
   *  the normalised command (a cryptographic hash is not needed: hits are verified byte for byte). */
  keyOf(ctx: Context, norm: Uint8Array): string {
    return this.prefixOf(ctx.db, ctx.collection) + hash64(norm.dataStart, norm.length).toString(16);
  }

  /** "e:<local epoch>.<global gen>:<db gen>:<namespace gen>:". Every bump (in any instance: the
   *  kv store is shared) also changes VERSION_KEY, so while it is unchanged the prefixes computed
   *  before are still exact: a lookup then costs one kv read instead of three. */
  prefixOf(db: string, coll: string): string {
    const v = this.gen(VERSION_KEY);
    if (v != this.seenVersion || this.seenEpoch != this.localEpoch) {
      this.prefixes.clear();
      this.seenVersion = v;
      this.seenEpoch = this.localEpoch;
    }
    const ns = db + "." + coll;
    if (this.prefixes.has(ns)) return this.prefixes.get(ns);
    const p = "e:" + this.localEpoch.toString() + "." + this.gen("epoch") + ":" + this.gen("d:" + db) + ":" + this.gen("n:" + ns) + ":";
    if (this.prefixes.size >= 4096) this.prefixes.clear();
    this.prefixes.set(ns, p);
    return p;
  }

  entryBytes(key: string, v: Uint8Array): i32 { return key.length * 2 + v.length; }

  store(key: string, value: Uint8Array): void {
    const now = nowNs();
    // drop ledger entries that have expired in the host store
    while (this.lHead < this.lKeys.length && this.lExp[this.lHead] <= now) this.dropHead(false);
    const size = this.entryBytes(key, value);
    while (this.used + size > this.maxBytes && this.evictOne()) {}
    if (this.used + size > this.maxBytes) return;
    while (!kv.set(key, value, this.ttlMs)) {
      if (!this.evictOne()) return; // host cap (kv_max_bytes) reached: skip
    }
    this.lKeys.push(key);
    this.lBytes.push(size);
    this.lExp.push(now + <i64>this.ttlMs * 1000000);
    this.used += size;
    this.stores!.inc();
    this.bytes!.set(<f64>this.used);
    if (this.lHead > 1024 && this.lHead * 2 > this.lKeys.length) this.compact();
  }

  evictOne(): bool {
    if (this.lHead >= this.lKeys.length) return false;
    this.dropHead(true);
    return true;
  }

  dropHead(remove: bool): void {
    const i = this.lHead;
    if (remove) kv.remove(this.lKeys[i]);
    this.used -= this.lBytes[i];
    this.lKeys[i] = "";
    this.lHead++;
    this.bytes!.set(<f64>this.used);
  }

  compact(): void {
    this.lKeys = this.lKeys.slice(this.lHead);
    this.lBytes = this.lBytes.slice(this.lHead);
    this.lExp = this.lExp.slice(this.lHead);
    this.lHead = 0;
  }
}

function replyOk(reply: BsonDoc | null): bool {
  if (reply === null) return false;
  const ok = reply.get("ok");
  return ok !== null && ok.isNumber() && ok.asNumber() == 1;
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
