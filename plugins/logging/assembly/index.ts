// logging: one structured line (JSON) per request, written at the response phase:
//   {"op":"find","db":"app","collection":"users","duration_us":412,"pipeline":"default",
//    "status":"ok","request_id":7,"connection_id":3,"app":"shop"}  (+ "code" when status is error)
// List the step in both phases (request: remembers the start time; response: logs).
import { Step, Context, Action, registerStep, log, LogLevel, nowNs } from "../../../sdk/assembly/index";
import { BsonDoc, BsonType } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { quote } from "../../_shared/json";
import { StartTimes } from "../../_shared/timing";

const LEVELS: string[] = ["trace", "debug", "info", "warn", "error"];

class Logging extends Step {
  rate: f64 = 1;
  level: i32 = LogLevel.Info;
  acc: f64 = 0;
  starts: StartTimes = new StartTimes();
  sampledRid: i64 = -1;
  sampledConn: i64 = -1;
  parts: string[] = new Array<string>(32);

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    c.keys(c.root, ["sample_rate", "level"], "");
    const rate = c.num(c.root, "sample_rate", 1, "");
    if (!(rate >= 0 && rate <= 1)) c.fail("sample_rate must be between 0 and 1");
    const level = c.oneOf(c.root, "level", LEVELS, "info", "");
    if (!c.ok) { log.error("logging: bad config: " + c.error); return false; }
    this.rate = rate;
    this.level = LEVELS.indexOf(level);
    return true;
  }

  /** Deterministic sampling: an accumulator emits exactly rate × N of N requests, evenly spread. */
  sample(): bool {
    if (this.rate >= 1) return true;
    this.acc += this.rate;
    if (this.acc >= 1) { this.acc -= 1; return true; }
    return false;
  }

  onRequest(ctx: Context): Action {
    if (this.sample()) this.starts.put(ctx, nowNs());
    return Action.Continue;
  }

  onResponse(ctx: Context): Action {
    const start = this.starts.take(ctx);
    if (start < 0) return Action.Continue; // not sampled (or the request phase did not run)
    const dur = (nowNs() - start) / 1000; // integer µs
    let status = "error";
    let code = "";
    const reply = BsonDoc.fromBytes(ctx.body());
    if (reply !== null) {
      const ok = reply.get("ok");
      if (ok !== null && ((ok.isNumber() && ok.asNumber() == 1) || (ok.type == BsonType.BOOL && ok.asBool()))) status = "ok";
      else {
        const c = reply.get("code");
        if (c !== null && c.isNumber()) code = (<i64>c.asNumber()).toString();
      }
    }
    // One allocation for the line: the pieces go into a reused array and are joined once
    // (chained `+` allocated a new, longer string per piece).
    const p = this.parts;
    p.length = 0;
    p.push("{\"op\":"); p.push(quote(ctx.op));
    p.push(",\"db\":"); p.push(quote(ctx.db));
    p.push(",\"collection\":"); p.push(quote(ctx.collection));
    p.push(",\"duration_us\":"); p.push(dur.toString());
    p.push(",\"pipeline\":"); p.push(quote(ctx.pipelineId));
    p.push(",\"status\":\""); p.push(status); p.push("\"");
    if (code.length > 0) { p.push(",\"code\":"); p.push(code); }
    p.push(",\"request_id\":"); p.push(ctx.requestId.toString());
    p.push(",\"connection_id\":"); p.push(ctx.connectionId.toString());
    p.push(",\"app\":"); p.push(quote(ctx.appName));
    p.push(ctx.isLocalReply ? ",\"local_reply\":true}" : "}");
    const line = p.join("");
    switch (this.level) {
      case LogLevel.Trace: log.trace(line); break;
      case LogLevel.Debug: log.debug(line); break;
      case LogLevel.Warn: log.warn(line); break;
      case LogLevel.Error: log.error(line); break;
      default: log.info(line);
    }
    return Action.Continue;
  }
}

registerStep(new Logging());
export * from "../../../sdk/assembly/exports";
