// route: the first rule matching the request's database / collection / operation chooses the
// upstream (ctx.setRoute); no match → `default` if set, else the proxy's default upstream.
import { Step, Phases, Context, Action, registerStep, log } from "../../../sdk/assembly/index";
import { Conf } from "../../_shared/config";
import { NameSet, inSet } from "../../_shared/match";

class Rule {
  dbs: NameSet | null = null;
  colls: NameSet | null = null;
  ops: NameSet | null = null;
  upstream: string = "";
}

/**
 * "" when `uri` is a mongodb:// URI the host can open (host[:port][,host[:port]...][/db][?opts]),
 * else why not. The host refuses what is refused here (runtime/upstream/uri.ts), so a route that
 * passes configure does not fail per request: mongodb+srv:// (the host resolves SRV records for
 * upstream.uri at startup only, never on the request path), and
 * with credentials an authMechanism other than SCRAM-SHA-256 / SCRAM-SHA-1.
 */
function checkUri(uri: string): string {
  if (uri.startsWith("mongodb+srv://")) return "is a mongodb+srv:// URI: not supported, list the hosts as mongodb://host:port,host:port";
  if (!uri.startsWith("mongodb://")) return "must start with mongodb://";
  let rest = uri.substring(10);
  const at = rest.lastIndexOf("@", rest.indexOf("/") < 0 ? rest.length : rest.indexOf("/"));
  if (at >= 0) {
    rest = rest.substring(at + 1);
    const mech = queryValue(rest, "authMechanism");
    if (mech !== null && mech != "SCRAM-SHA-256" && mech != "SCRAM-SHA-1") {
      return "has authMechanism \"" + mech + "\": use SCRAM-SHA-256 or SCRAM-SHA-1";
    }
  }
  let end = rest.length;
  const slash = rest.indexOf("/");
  const q = rest.indexOf("?");
  if (slash >= 0) end = slash;
  if (q >= 0 && q < end) end = q;
  const hosts = rest.substring(0, end);
  if (hosts.length == 0) return "has no host";
  const list = hosts.split(",");
  for (let i = 0; i < list.length; i++) {
    const h = list[i];
    if (h.length == 0) return "has an empty host";
    let host = h, port = "";
    if (h.startsWith("[")) {
      const e = h.indexOf("]");
      if (e < 0) return "has a bad IPv6 host";
      host = h.substring(1, e);
      if (e + 1 < h.length) {
        if (h.charCodeAt(e + 1) != 0x3a) return "has a bad IPv6 host";
        port = h.substring(e + 2);
        if (port.length == 0) return "has an empty port";
      }
    } else {
      const c = h.indexOf(":");
      if (c >= 0) {
        host = h.substring(0, c); port = h.substring(c + 1);
        if (port.length == 0) return "has an empty port";
      }
    }
    if (host.length == 0) return "has an empty host";
    for (let j = 0; j < host.length; j++) {
      const ch = host.charCodeAt(j);
      if (ch <= 0x20 || ch == 0x2f || ch == 0x3f || ch == 0x23) return "has a bad host \"" + host + "\"";
    }
    if (port.length > 0) {
      if (port.length > 5) return "has a bad port \"" + port + "\"";
      let p = 0;
      for (let j = 0; j < port.length; j++) {
        const ch = port.charCodeAt(j);
        if (ch < 0x30 || ch > 0x39) return "has a bad port \"" + port + "\"";
        p = p * 10 + (ch - 0x30);
      }
      if (p < 1 || p > 65535) return "has a port out of range \"" + port + "\"";
    }
  }
  return "";
}

/** The value of `name` in the URI's ?query (first occurrence), or null when absent. */
function queryValue(rest: string, name: string): string | null {
  const q = rest.indexOf("?");
  if (q < 0) return null;
  const pairs = rest.substring(q + 1).split("&");
  for (let i = 0; i < pairs.length; i++) {
    const eq = pairs[i].indexOf("=");
    const k = eq < 0 ? pairs[i] : pairs[i].substring(0, eq);
    if (k == name) return eq < 0 ? "" : pairs[i].substring(eq + 1);
  }
  return null;
}

class Route extends Step {
  phases: i32 = Phases.Request;
  rules: Rule[] = [];
  fallback: string = "";

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    const root = c.root;
    c.keys(root, ["rules", "default", "upstream"], "");
    // `upstream` alone (SPEC §2.8 shape) = route everything there
    this.fallback = c.str(root, "default", c.str(root, "upstream", "", ""), "");
    if (root.has("default") && root.has("upstream")) c.fail("give either default or upstream, not both");
    if (this.fallback.length > 0) {
      const e = checkUri(this.fallback);
      if (e.length > 0) c.fail("default upstream \"" + this.fallback + "\" " + e);
    }
    const rules = c.arr(root, "rules", "");
    const out = new Array<Rule>();
    if (rules !== null) {
      for (let i = 0; i < rules.length && c.ok; i++) {
        const where = "rules[" + i.toString() + "].";
        const r = rules[i];
        if (!r.isObj) { c.fail("rules[" + i.toString() + "] must be an object"); break; }
        c.keys(r, ["dbs", "collections", "ops", "upstream"], where);
        const rule = new Rule();
        rule.dbs = NameSet.of(c.strList(r, "dbs", where));
        rule.colls = NameSet.of(c.strList(r, "collections", where));
        rule.ops = NameSet.ofOps(c.strList(r, "ops", where));
        rule.upstream = c.str(r, "upstream", "", where);
        if (rule.upstream.length == 0) c.fail(where + "upstream is required");
        else {
          const e = checkUri(rule.upstream);
          if (e.length > 0) c.fail(where + "upstream \"" + rule.upstream + "\" " + e);
        }
        out.push(rule);
      }
    }
    if (c.ok && out.length == 0 && this.fallback.length == 0) c.fail("needs rules or a default upstream");
    if (!c.ok) { log.error("route: bad config: " + c.error); return false; }
    this.rules = out;
    return true;
  }

  onRequest(ctx: Context): Action {
    const rules = this.rules;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i];
      if (inSet(r.dbs, ctx.db) && inSet(r.colls, ctx.collection) && inSet(r.ops, ctx.op)) {
        ctx.setRoute(r.upstream);
        return Action.Continue;
      }
    }
    if (this.fallback.length > 0) ctx.setRoute(this.fallback);
    return Action.Continue;
  }
}

registerStep(new Route());
export * from "../../../sdk/assembly/exports";
