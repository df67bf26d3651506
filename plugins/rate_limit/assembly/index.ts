// rate_limit: token bucket of `max_rps` tokens per second holding at most `burst` tokens, one
// bucket globally, per client host or per appName. Bucket state lives in the host kv store (16
// bytes per bucket: tokens f64 + last refill ns i64) so it survives instance rebuilds and
// reloads; idle buckets expire (TTL = time to refill completely + 1 s), which bounds the store.
import { Step, Phases, Context, Action, registerStep, log, kv, nowNs, Counter } from "../../../sdk/assembly/index";
import { Conf } from "../../_shared/config";
import { hostOf } from "../../_shared/match";

const PER_GLOBAL = 0;
const PER_CLIENT = 1;
const PER_APP = 2;

const state = new Uint8Array(16);

class RateLimit extends Step {
  phases: i32 = Phases.Request;
  maxRps: f64 = 0;
  burst: f64 = 0;
  per: i32 = PER_GLOBAL;
  ttlMs: i32 = 0;
  limited: Counter | null = null;
  warnedFull: bool = false;

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    const root = c.root;
    c.keys(root, ["max_rps", "burst", "per"], "");
    if (!root.has("max_rps")) c.fail("max_rps is required");
    const rps = c.num(root, "max_rps", 1, "");
    if (!(rps > 0) || !isFinite(rps)) c.fail("max_rps must be a positive number");
    const burst = c.num(root, "burst", rps < 1 ? 1 : rps, "");
    if (!(burst >= 1) || !isFinite(burst)) c.fail("burst must be a number >= 1");
    const per = c.oneOf(root, "per", ["global", "client", "app"], "global", "");
    if (!c.ok) { log.error("rate_limit: bad config: " + c.error); return false; }
    this.maxRps = rps;
    this.burst = burst;
    this.per = per == "client" ? PER_CLIENT : per == "app" ? PER_APP : PER_GLOBAL;
    const refillMs = burst / rps * 1000 + 1000;
    this.ttlMs = refillMs > 2147483647 ? 2147483647 : <i32>refillMs;
    this.limited = new Counter("proxy_plugin_rate_limited_total");
    return true;
  }

  onRequest(ctx: Context): Action {
    let key: string;
    let who: string;
    if (this.per == PER_CLIENT) { who = hostOf(ctx.clientAddress); key = "c:" + who; }
    else if (this.per == PER_APP) { who = ctx.appName; key = "a:" + who; }
    else { who = ""; key = "g"; }
    const now = nowNs();
    let tokens = this.burst;
    if (kv.getInto(key, state) == 16) {
      const t = load<f64>(state.dataStart);
      const last = load<i64>(state.dataStart + 8);
      const elapsed = now > last ? <f64>(now - last) / 1e9 : 0;
      tokens = Math.min(this.burst, t + elapsed * this.maxRps);
    }
    const allowed = tokens >= 1;
    if (allowed) tokens -= 1;
    store<f64>(state.dataStart, tokens);
    store<i64>(state.dataStart + 8, now);
    if (!kv.set(key, state, this.ttlMs) && !this.warnedFull) {
      // Store full: this bucket is not tracked (requests pass). Logged once per instance.
      this.warnedFull = true;
      log.warn("rate_limit: kv store full, bucket " + key + " not tracked; raise the step's kv_max_bytes");
    }
    if (allowed) return Action.Continue;
    this.limited!.inc();
    let msg = "rate limit exceeded: max " + fmt(this.maxRps) + " requests/s (burst " + fmt(this.burst) + ")";
    if (this.per == PER_CLIENT) msg += " per client, client " + who;
    else if (this.per == PER_APP) msg += " per app, app \"" + who + "\"";
    return ctx.reject(462, "RateLimitExceeded", msg);
  }
}

function fmt(x: f64): string {
  return Math.floor(x) == x ? (<i64>x).toString() : x.toString();
}

registerStep(new RateLimit());
export * from "../../../sdk/assembly/exports";
