// metrics: a request counter and a latency histogram, each one labelled family:
//   proxy_plugin_requests_total{op, db, collection, status}
//   proxy_plugin_request_duration_us{op, db, collection, status}
// (plus pipeline_id and pipeline, added by the host). `op` is the command name for a known set
// of operations and "other" for the rest; `status` is "ok" or "error" (the reply's ok); db and
// collection are bounded by the host (1000 label sets per metric, then "other"). Config `labels`
// chooses which of the four labels the families carry (all by default).
// Everything happens at the response phase: the duration is the host's elapsed time since it read
// the request, and the reply status comes from the host's peek (no copy of the reply). The label
// values are strings the SDK keeps while they repeat, so a repeated label set costs no host call
// beyond the two observations.
import { Step, Phases, Context, Action, registerStep, log, Counter, Histogram } from "../../../sdk/assembly/index";
import { Conf } from "../../_shared/config";

const KNOWN_OPS: string[] = [
  "find", "insert", "update", "delete", "aggregate", "count", "distinct", "findAndModify", "getMore",
  "killCursors", "bulkWrite", "create", "drop", "createIndexes", "listCollections", "listIndexes",
];
const LABELS: string[] = ["op", "db", "collection", "status"];
const OP = 0, DB = 1, COLLECTION = 2, STATUS = 3;

class Metrics extends Step {
  phases: i32 = Phases.Response;
  requests: Counter | null = null;
  duration: Histogram | null = null;
  /** The labels the families carry, as indexes into LABELS, in their declared order. */
  which: i32[] = [];
  /** Whether they are all four in LABELS' order (the default): the common case, without lookups. */
  all: bool = true;
  /** The op string whose label is cached (the SDK keeps the same string while the op repeats). */
  lastOp: string | null = null;
  lastOpLabel: string = "other";

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    c.keys(c.root, ["labels"], "");
    const labels = c.strList(c.root, "labels", "");
    const names = labels === null ? LABELS : labels;
    const which: i32[] = [];
    for (let i = 0; i < names.length; i++) {
      const k = LABELS.indexOf(names[i]);
      if (k < 0) c.fail("labels: \"" + names[i] + "\" is not one of " + LABELS.join(", "));
      else if (which.includes(k)) c.fail("labels: \"" + names[i] + "\" is listed twice");
      else which.push(k);
    }
    if (!c.ok) { log.error("metrics: bad config: " + c.error); return false; }
    this.which = which;
    this.all = which.length == 4 && which[0] == OP && which[1] == DB && which[2] == COLLECTION && which[3] == STATUS;
    this.requests = new Counter("proxy_plugin_requests_total", names);
    this.duration = new Histogram("proxy_plugin_request_duration_us", names);
    return true;
  }

  // @ts-ignore: decorator
  @inline opLabel(op: string): string {
    if (changetype<usize>(this.lastOp) != 0 && changetype<usize>(this.lastOp) == changetype<usize>(op)) return this.lastOpLabel;
    this.lastOp = op;
    this.lastOpLabel = KNOWN_OPS.includes(op) ? op : "other";
    return this.lastOpLabel;
  }

  value(k: i32, ctx: Context): string {
    if (k == OP) return this.opLabel(ctx.op);
    if (k == DB) return ctx.db;
    if (k == COLLECTION) return ctx.collection;
    return ctx.replyOk == 1 ? "ok" : "error";
  }

  onResponse(ctx: Context): Action {
    let v0: string, v1: string, v2: string, v3: string;
    if (this.all) {
      v0 = this.opLabel(ctx.op);
      v1 = ctx.db;
      v2 = ctx.collection;
      v3 = ctx.replyOk == 1 ? "ok" : "error";
    } else {
      const w = this.which;
      const n = w.length;
      v0 = n > 0 ? this.value(w[0], ctx) : "";
      v1 = n > 1 ? this.value(w[1], ctx) : "";
      v2 = n > 2 ? this.value(w[2], ctx) : "";
      v3 = n > 3 ? this.value(w[3], ctx) : "";
    }
    this.requests!.labels(v0, v1, v2, v3).inc();
    this.duration!.labels(v0, v1, v2, v3).observe(<f64>ctx.elapsedNs / 1000);
    return Action.Continue;
  }
}

registerStep(new Metrics());
export * from "../../../sdk/assembly/exports";
