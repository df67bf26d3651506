import { proxy_define_metric, proxy_increment_metric, proxy_record_metric, proxy_subop_begin, proxy_subop_end, MetricKind, strPtr, strLen } from "./host";

function define(kind: MetricKind, name: string): i32 {
  const id = proxy_define_metric(kind, strPtr(name), strLen(name));
  if (id < 0) throw new Error("metric name refused (must match proxy_plugin_[a-z0-9_]+): " + name);
  return id;
}

/** A counter named `proxy_plugin_*`. Define once (top level or onConfigure), update by id. */
export class Counter {
  readonly id: i32;
  constructor(name: string) { this.id = define(MetricKind.Counter, name); }
  inc(delta: f64 = 1): void { proxy_increment_metric(this.id, delta); }
}

export class Gauge {
  readonly id: i32;
  constructor(name: string) { this.id = define(MetricKind.Gauge, name); }
  set(value: f64): void { proxy_record_metric(this.id, value); }
  inc(delta: f64 = 1): void { proxy_increment_metric(this.id, delta); }
}

export class Histogram {
  readonly id: i32;
  constructor(name: string) { this.id = define(MetricKind.Histogram, name); }
  observe(value: f64): void { proxy_record_metric(this.id, value); }
}

/** A named sub-operation inside the step (flame graph third level, trace sub-span). */
export class SubOp {
  end(): void { proxy_subop_end(); }
}
const theSubOp = new SubOp();

/** `const s = subop("cache.lookup"); …; s.end();` — no allocation. */
export function subop(name: string): SubOp {
  proxy_subop_begin(strPtr(name), strLen(name));
  return theSubOp;
}
