// cache: response cache for reads (find, count, distinct, aggregate without $out/$merge) in the
// host kv store. Key = a 64-bit hash of the normalised command, prefixed with generation counters
// (global epoch, database, namespace) that writes bump, so a write invalidates every entry of
// its collection at once without enumerating them. See ../README.md and docs/steps.md.
//
// This file is the step itself: configuration and the two phase callbacks. The concerns live
// next to it: key.ts (normalised command, hash, kv key), entry.ts (entry encoding),
// generations.ts (key prefixes, invalidation by bump), invalidation.ts (what a write bumps),
// ledger.ts (eviction within max_bytes).
//
// The read path (lookup, store) allocates nothing per request but the body copy: the normalised
// command, the kv key (built in place) and the stored entry live in reused buffers, the
// command is walked with one re-pointed BsonValue, and the reply's `ok` is read by the walk that
// builds the entry (no host call).
import { Step, Context, Action, RequestContext, registerStep, log, kv, subop, Counter, Gauge } from "../../../sdk/assembly/index";
import { BsonDoc } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { NameSet, classify, pipelineWrites } from "../../_shared/match";
import { CommandKey, KvKey, NOT_CACHEABLE, hash64 } from "./key";
import { EntryBuffer } from "./entry";
import { Generations } from "./generations";
import { invalidationTargets } from "./invalidation";
import { Ledger } from "./ledger";

const CACHEABLE: string[] = ["find", "count", "distinct", "aggregate"];

/** The invalidation targets of a read (none), shared: a miss allocates nothing. */
const NO_TARGETS: string[] = [];

/** What the response phase must do for a request: its request context (the SDK recycles them). */
class Pending extends RequestContext {
  /** Set when the request phase left something to do. */
  active: bool = false;
  /** Key prefix (generations at request time); null = an invalidation to repeat at the response. */
  prefix: string | null = null;
  hash: u64 = 0;
  /** The normalised command the key was hashed from: stored with the reply, compared on a hit. */
  norm: Uint8Array = new Uint8Array(256);
  normLen: i32 = 0;
  inval: string[] = NO_TARGETS;
  commit: bool = false;

  onDone(): void {
    this.active = false;
    // (reference stores cost a GC write barrier each: only what is set)
    if (changetype<usize>(this.prefix) != 0) this.prefix = null;
    if (changetype<usize>(this.inval) != changetype<usize>(NO_TARGETS)) this.inval = NO_TARGETS;
  }
}

class Cache extends Step {
  maxEntry: i32 = 256 << 10;
  ops: NameSet | null = null;
  command: CommandKey = new CommandKey();
  key: KvKey = new KvKey();
  entry: EntryBuffer = new EntryBuffer();
  ledger: Ledger = new Ledger();
  gens: Generations = new Generations(this.ledger, this.key);
  /** The op string whose classification is cached (the SDK hands out the same string object
   *  while the op repeats, so identity is the cheap check). */
  lastOp: string | null = null;
  lastOpKind: i32 = 0;
  /** The command / reply, copied here instead of a fresh array per call. */
  bodyBuf: Uint8Array = new Uint8Array(4096);
  hits: Counter | null = null;
  misses: Counter | null = null;

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
    // The entries live in the host store: past its cap the host evicts its least recently used
    // keys, so the cache holds at most kv_max_bytes whatever max_bytes says.
    const cap = kv.maxBytes();
    if (cap > 0 && <i64>maxBytes > cap) {
      log.warn("cache: max_bytes (" + (<i64>maxBytes).toString() + ") is above the step's kv_max_bytes (" + cap.toString() +
        "): the cache holds at most kv_max_bytes; raise kv_max_bytes to at least max_bytes");
    }
    this.ledger.ttlMs = <i32>ttl;
    this.ledger.maxBytes = <i64>maxBytes;
    // The host's cap binds first: the ledger leaves eviction to the host (ledger.ts).
    this.ledger.hostBound = cap > 0 && <i64>maxBytes >= cap;
    this.ledger.hostCap = cap;
    this.maxEntry = <i32>maxEntry;
    this.ops = NameSet.ofOps(ops === null ? CACHEABLE : ops);
    this.hits = new Counter("proxy_plugin_cache_hits_total");
    this.misses = new Counter("proxy_plugin_cache_misses_total");
    this.ledger.stores = new Counter("proxy_plugin_cache_stores_total");
    this.gens.invalidations = new Counter("proxy_plugin_cache_invalidations_total");
    this.ledger.bytes = new Gauge("proxy_plugin_cache_bytes");
    return true;
  }

  newRequestContext(): RequestContext | null { return new Pending(); }

  /** 0 neutral/other read, 1 cacheable read op, 2 write, 3 aggregate (decided per command),
   *  4 commitTransaction. */
  opKind(op: string): i32 {
    if (changetype<usize>(this.lastOp) != 0 && changetype<usize>(this.lastOp) == changetype<usize>(op)) return this.lastOpKind;
    let k: i32;
    if (op == "commitTransaction") k = 4;
    else if (op == "aggregate") k = 3;
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
    const kind = this.opKind(op);
    if (kind == 0) return Action.Continue;
    if (kind == 4) { this.remember(ctx, null, 0, NO_TARGETS, true); return Action.Continue; }
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
      const targets = invalidationTargets(ctx, cmd);
      this.gens.invalidate(targets);
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
    const command = this.command;
    const n = command.normalise(this.bodyBuf, size);
    if (n == NOT_CACHEABLE) { s.end(); return Action.Continue; }
    const hash = hash64(command.norm.dataStart, n);
    const prefix = this.gens.prefixFor(ctx.db, ctx.collection);
    this.key.build(prefix, hash);
    const len = this.entry.fetch(this.key);
    s.end();
    const reply = this.entry.replyFor(len, command.norm.dataStart, n);
    if (reply != 0) {
      this.hits!.inc();
      return ctx.replyLocalAt(reply, <i32>(this.entry.buf.dataStart + <usize>len - reply));
    }
    this.misses!.inc();
    this.remember(ctx, prefix, hash, NO_TARGETS, false);
    return Action.Continue;
  }

  onResponse(ctx: Context): Action {
    const r = ctx.request;
    if (r === null) return Action.Continue;
    const p = <Pending>r;
    if (!p.active || ctx.isLocalReply) return Action.Continue;
    if (p.commit) {
      if (ctx.replyOk == 1) this.gens.bump("epoch");
      return Action.Continue;
    }
    const prefix = p.prefix;
    if (changetype<usize>(prefix) == 0) { this.gens.invalidate(p.inval); return Action.Continue; }
    // (only an `ok: 1` reply is stored: entry.build reads ok as it walks the reply)
    const s = subop("cache.store");
    const size = this.readBody(ctx);
    const n = size < 0 ? 0 : this.entry.build(this.bodyBuf, size, p.norm, p.normLen, this.maxEntry);
    if (n > 0) this.ledger.store(changetype<string>(prefix), p.hash, this.entry.buf.dataStart, n, this.key);
    s.end();
    return Action.Continue;
  }

  /** What the response phase must do, in this request's context. */
  remember(ctx: Context, prefix: string | null, hash: u64, inval: string[], commit: bool): void {
    const r = ctx.request;
    if (r === null) return;
    const p = <Pending>r;
    p.active = true; p.prefix = prefix; p.hash = hash; p.commit = commit;
    if (changetype<usize>(p.inval) != changetype<usize>(inval)) p.inval = inval;
    if (changetype<usize>(prefix) != 0) {
      const n = this.command.normLen;
      if (p.norm.length < n) p.norm = new Uint8Array(n);
      memory.copy(p.norm.dataStart, this.command.norm.dataStart, n);
      p.normLen = n;
    }
  }
}

registerStep(new Cache());
export * from "../../../sdk/assembly/exports";
