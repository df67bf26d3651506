// metrics: request counters and latency histograms per operation. The host's plugin metrics carry
// only a `pipeline` label, so the per-operation series are separate metrics, one per known
// operation (bounded set) plus "other":
//   proxy_plugin_requests_total, proxy_plugin_request_errors_total, proxy_plugin_request_duration_us
//   proxy_plugin_op_<op>_requests_total, proxy_plugin_op_<op>_duration_us   (<op> lower-cased)
// Counting happens at the response phase (list the step in both phases for durations).
import { Step, Context, Action, registerStep, log, nowNs, Counter, Histogram } from "../../../sdk/assembly/index";
import { BsonDoc, BsonType } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { StartTimes } from "../../_shared/timing";

export const KNOWN_OPS: string[] = [
  "find", "insert", "update", "delete", "aggregate", "count", "distinct", "findAndModify", "getMore",
  "killCursors", "bulkWrite", "create", "drop", "createIndexes", "listCollections", "listIndexes",
];

class Metrics extends Step {
  starts: StartTimes = new StartTimes();
  total: Counter | null = null;
  errors: Counter | null = null;
  duration: Histogram | null = null;
  opCounters: Counter[] = [];
  opDurations: Histogram[] = [];

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    c.keys(c.root, [], "");
    if (!c.ok) { log.error("metrics: bad config: " + c.error); return false; }
    this.total = new Counter("proxy_plugin_requests_total");
    this.errors = new Counter("proxy_plugin_request_errors_total");
    this.duration = new Histogram("proxy_plugin_request_duration_us");
    this.opCounters = []; this.opDurations = [];
    for (let i = 0; i <= KNOWN_OPS.length; i++) {
      const n = i < KNOWN_OPS.length ? KNOWN_OPS[i].toLowerCase() : "other";
      this.opCounters.push(new Counter("proxy_plugin_op_" + n + "_requests_total"));
      this.opDurations.push(new Histogram("proxy_plugin_op_" + n + "_duration_us"));
    }
    return true;
  }

  onRequest(ctx: Context): Action {
    this.starts.put(ctx, nowNs());
    return Action.Continue;
  }

  onResponse(ctx: Context): Action {
    const start = this.starts.take(ctx);
    let i = KNOWN_OPS.indexOf(ctx.op);
    if (i < 0) i = KNOWN_OPS.length;
    this.total!.inc();
    this.opCounters[i].inc();
    if (start >= 0) {
      const us = <f64>(nowNs() - start) / 1000;
      this.duration!.observe(us);
      this.opDurations[i].observe(us);
    }
    const reply = BsonDoc.fromBytes(ctx.body());
    if (reply !== null) {
      const ok = reply.get("ok");
      if (ok === null || !((ok.isNumber() && ok.asNumber() == 1) || (ok.type == BsonType.BOOL && ok.asBool()))) this.errors!.inc();
    }
    return Action.Continue;
  }
}

registerStep(new Metrics());
export * from "../../../sdk/assembly/exports";
