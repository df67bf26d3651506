import {
  proxy_define_metric, proxy_metric_series, proxy_increment_metric, proxy_record_metric, proxy_subop_begin, proxy_subop_end,
  MetricKind, strPtr, strLen,
} from "./host";

// Label values go to the host in this buffer: each value as one UTF-16 unit holding its length,
// then its characters (the host cuts values longer than MAX_LABEL_VALUE_CHARS).
let valueBuf = new ArrayBuffer(512);

function define(kind: MetricKind, name: string, labels: string[]): i32 {
  const names = labels.join(",");
  const id = proxy_define_metric(kind, strPtr(name), strLen(name), strPtr(names), strLen(names));
  if (id < 0) throw new Error("metric refused (name proxy_plugin_[a-z0-9_]+, label names [a-z_][a-z0-9_]*, at most 4, one kind per name): " + name);
  return id;
}

/**
 * What every metric shares: its id and label count, and its label sets. A label set's series is
 * remembered for the last values given (compared by identity: the strings the SDK hands out repeat
 * while they are unchanged, literals always do) and by the id the host gave it, so labels() costs
 * nothing while the values repeat and one host call for a set seen before.
 */
class Metric<S> {
  readonly id: i32;
  readonly labelCount: i32;
  private last0: string | null = null;
  private last1: string | null = null;
  private last2: string | null = null;
  private last3: string | null = null;
  private lastSeries: S;
  private readonly byId: Map<i32, S> = new Map<i32, S>();

  constructor(kind: MetricKind, name: string, labels: string[]) {
    const id = define(kind, name, labels);
    this.id = id;
    this.labelCount = labels.length;
    this.lastSeries = instantiate<S>(-1);
  }

  /** The series of these label values, one per declared label in order (extra values are
   *  ignored, missing ones are ""). Keep it or call labels() again: both are cheap. */
  // @ts-ignore: decorator
  @inline labels(v0: string, v1: string = "", v2: string = "", v3: string = ""): S {
    if (same(v0, this.last0) && same(v1, this.last1) && same(v2, this.last2) && same(v3, this.last3)) return this.lastSeries;
    return this.resolve(v0, v1, v2, v3);
  }

  private resolve(v0: string, v1: string, v2: string, v3: string): S {
    const n = this.labelCount;
    let need = 0;
    if (n > 0) need += v0.length + 1;
    if (n > 1) need += v1.length + 1;
    if (n > 2) need += v2.length + 1;
    if (n > 3) need += v3.length + 1;
    if ((need << 1) > valueBuf.byteLength) valueBuf = new ArrayBuffer(need << 1);
    const base = changetype<usize>(valueBuf);
    let p = base;
    if (n > 0) p = put(p, v0);
    if (n > 1) p = put(p, v1);
    if (n > 2) p = put(p, v2);
    if (n > 3) p = put(p, v3);
    const h = proxy_metric_series(this.id, base, <i32>(p - base));
    let s: S;
    if (this.byId.has(h)) s = this.byId.get(h);
    else { s = instantiate<S>(h); this.byId.set(h, s); }
    this.last0 = v0; this.last1 = v1; this.last2 = v2; this.last3 = v3;
    this.lastSeries = s;
    return s;
  }
}

// @ts-ignore: decorator
@inline function same(a: string, b: string | null): bool { return changetype<usize>(a) == changetype<usize>(b); }

function put(p: usize, s: string): usize {
  const n = <usize>min(s.length, 0xffff);
  store<u16>(p, <u16>n);
  memory.copy(p + 2, changetype<usize>(s), n << 1);
  return p + 2 + (n << 1);
}

/**
 * A counter named `proxy_plugin_*`, with up to 4 label names (default none). Define once (top level
 * or onConfigure); `inc()` it, or `labels(values…).inc()` one label set of it.
 */
export class Counter extends Metric<CounterSeries> {
  constructor(name: string, labels: string[] = []) { super(MetricKind.Counter, name, labels); }
  inc(delta: f64 = 1): void { proxy_increment_metric(this.id, delta); }
}

/** One label set of a Counter. */
export class CounterSeries {
  readonly id: i32;
  constructor(id: i32) { this.id = id; }
  inc(delta: f64 = 1): void { proxy_increment_metric(this.id, delta); }
}

export class Gauge extends Metric<GaugeSeries> {
  constructor(name: string, labels: string[] = []) { super(MetricKind.Gauge, name, labels); }
  set(value: f64): void { proxy_record_metric(this.id, value); }
  inc(delta: f64 = 1): void { proxy_increment_metric(this.id, delta); }
}

/** One label set of a Gauge. */
export class GaugeSeries {
  readonly id: i32;
  constructor(id: i32) { this.id = id; }
  set(value: f64): void { proxy_record_metric(this.id, value); }
  inc(delta: f64 = 1): void { proxy_increment_metric(this.id, delta); }
}

export class Histogram extends Metric<HistogramSeries> {
  constructor(name: string, labels: string[] = []) { super(MetricKind.Histogram, name, labels); }
  observe(value: f64): void { proxy_record_metric(this.id, value); }
}

/** One label set of a Histogram. */
export class HistogramSeries {
  readonly id: i32;
  constructor(id: i32) { this.id = id; }
  observe(value: f64): void { proxy_record_metric(this.id, value); }
}

/** A named sub-operation inside the step (flame graph third level, trace sub-span). */
export class SubOp {
  /** Whether begin reached the host (the call carries CallFlag.TimeSubops), so end must too. */
  readonly timed: bool;
  constructor(timed: bool) { this.timed = timed; }
  end(): void { if (this.timed) proxy_subop_end(); }
}
const timedSubOp = new SubOp(true);
const untimedSubOp = new SubOp(false);

/** Whether the host times sub-operations in the callback running now (set by the SDK's exports from its flags). */
let subopsTimed = false;

/** @internal Called by the SDK's exports at the start of each phase callback. */
export function setSubopsTimed(on: bool): void { subopsTimed = on; }

/**
 * `const s = subop("cache.lookup"); …; s.end();` — no allocation. When the host does not time
 * sub-operations in this call (profiling off, or this request is not in its sample), neither
 * call crosses into the host.
 */
export function subop(name: string): SubOp {
  if (!subopsTimed) return untimedSubOp;
  proxy_subop_begin(strPtr(name), strLen(name));
  return timedSubOp;
}
