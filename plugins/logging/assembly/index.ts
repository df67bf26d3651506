// logging: one structured line per request, written at the response phase as fields of the
// proxy's own log line (the host adds time, level, logger, step and pipeline):
//   {"op":"find","db":"app","collection":"users","duration_us":412,"status":"ok",
//    "request_id":7,"connection_id":3,"app":"shop"}  (+ "code" when status is error, "user" when
//    the connection has one: logged in to the proxy, or set by an auth step)
// The duration is the host's elapsed time since it read the request, so the step needs only the
// response phase (listing it in the request phase too is harmless: that callback does nothing).
// The line is encoded as UTF-8 JSON in a reused buffer (LogRecord): no string is built.
import { Step, Phases, Context, Action, registerStep, log, LogLevel, LogRecord } from "../../../sdk/assembly/index";
import { Conf } from "../../_shared/config";

const LEVELS: string[] = ["trace", "debug", "info", "warn", "error"];

class Logging extends Step {
  phases: i32 = Phases.Response;
  rate: f64 = 1;
  level: i32 = LogLevel.Info;
  acc: f64 = 0;
  rec: LogRecord = new LogRecord();

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

  onResponse(ctx: Context): Action {
    // A line the proxy would drop (its log.level above this step's level) is not built.
    if (!this.sample() || !log.enabled(this.level)) return Action.Continue;
    const ok = ctx.replyOk == 1;
    const r = this.rec.begin()
      .str("op", ctx.op).str("db", ctx.db).str("collection", ctx.collection)
      .int("duration_us", ctx.elapsedNs / 1000)
      .str("status", ok ? "ok" : "error");
    if (!ok) {
      const code = ctx.replyCode;
      if (code != 0) r.int("code", code);
    }
    r.int("request_id", ctx.requestId).int("connection_id", ctx.connectionId).str("app", ctx.appName);
    const user = ctx.user;
    if (user.length > 0) r.str("user", user);
    if (ctx.isLocalReply) r.bool("local_reply", true);
    r.emit(this.level);
    return Action.Continue;
  }
}

registerStep(new Logging());
export * from "../../../sdk/assembly/exports";
