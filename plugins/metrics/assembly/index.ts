// metrics: request counters and latency histograms per operation. The host's plugin metrics carry
// only a `pipeline` label, so the per-operation series are separate metrics, one per known
// operation (bounded set) plus "other":
//   proxy_plugin_requests_total, proxy_plugin_request_errors_total, proxy_plugin_request_duration_us
//   proxy_plugin_op_<op>_requests_total, proxy_plugin_op_<op>_duration_us   (<op> lower-cased)
// Everything happens at the response phase: the duration is the host's elapsed time since it read
// the request, and the reply status comes from the host's peek (no copy of the reply).
import { Step, Phases, Context, Action, registerStep, log, Counter, Histogram } from "../../../sdk/assembly/index";
import { Conf } from "../../_shared/config";

export const KNOWN_OPS: string[] = [
  "find", "insert", "update", "delete", "aggregate", "count", "distinct", "findAndModify", "getMore",
  "killCursors", "bulkWrite", "create", "drop", "createIndexes", "listCollections", "listIndexes",
];

class Metrics extends Step {
  phases: i32 = Phases.Response;
  total: Counter | null = null;
  errors: Counter | null = null;
  duration: Histogram | null = null;
  opCounters: Counter[] = [];
  opDurations: Histogram[] = [];
  /** The op string the cached index belongs to (the SDK keeps the same string while the op repeats). */
  lastOp: string | null = null;
  lastIndex: i32 = 0;

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

  opIndex(op: string): i32 {
    if (this.lastOp !== null && changetype<usize>(this.lastOp) == changetype<usize>(op)) return this.lastIndex;
    let i = KNOWN_OPS.indexOf(op);
    if (i < 0) i = KNOWN_OPS.length;
    this.lastOp = op;
    this.lastIndex = i;
    return i;
  }

  onResponse(ctx: Context): Action {
    const i = this.opIndex(ctx.op);
    const us = <f64>ctx.elapsedNs / 1000;
    this.total!.inc();
    this.opCounters[i].inc();
    this.duration!.observe(us);
    this.opDurations[i].observe(us);
    if (ctx.replyOk != 1) this.errors!.inc();
    return Action.Continue;
  }
}

registerStep(new Metrics());
export * from "../../../sdk/assembly/exports";
