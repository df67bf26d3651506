// filter: ordered allow/deny rules on operation, database, collection and a field predicate of
// the command document. First matching rule decides; none → `default`. See ../README.md.
import { Step, Phases, Context, Action, registerStep, log, subop } from "../../../sdk/assembly/index";
import { BsonDoc, BsonValue, BsonType } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { JValue } from "../../_shared/json";
import { NameSet, inSet } from "../../_shared/match";
import { Regex } from "../../_shared/regex";
import { valuesAt, checkPath } from "../../_shared/paths";

const P_REGEX = 0;
const P_EQUALS = 1;
const P_EXISTS = 2;

class FieldPred {
  path: string = "";
  kind: i32 = P_EXISTS;
  rx: Regex | null = null;
  eq: JValue = new JValue();
  exists: bool = true;
}

class Rule {
  name: string = "";
  deny: bool = false;
  ops: NameSet | null = null;
  dbs: NameSet | null = null;
  colls: NameSet | null = null;
  field: FieldPred | null = null;
}

/** BSON value equals a JSON scalar (string, number, bool, null). */
function bsonEquals(v: BsonValue, j: JValue): bool {
  if (j.isStr) return v.type == BsonType.STRING && v.stringEquals(j.s);
  if (j.isNum) return v.isNumber() && v.asNumber() == j.n;
  if (j.isBool) return v.type == BsonType.BOOL && v.asBool() == j.b;
  if (j.isNull) return v.type == BsonType.NULL;
  return false;
}

class Filter extends Step {
  phases: i32 = Phases.Request;
  rules: Rule[] = [];
  defaultDeny: bool = false;

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    const root = c.root;
    c.keys(root, ["rules", "default"], "");
    this.defaultDeny = c.oneOf(root, "default", ["allow", "deny"], "allow", "") == "deny";
    const rules = c.arr(root, "rules", "");
    const out = new Array<Rule>();
    if (rules !== null) {
      for (let i = 0; i < rules.length && c.ok; i++) {
        const where = "rules[" + i.toString() + "].";
        const r = rules[i];
        if (!r.isObj) { c.fail(where.substring(0, where.length - 1) + " must be an object"); break; }
        c.keys(r, ["name", "action", "ops", "dbs", "collections", "field"], where);
        const rule = new Rule();
        rule.name = c.str(r, "name", "#" + (i + 1).toString(), where);
        if (r.get("action") === null) c.fail(where + "action is required (allow|deny)");
        rule.deny = c.oneOf(r, "action", ["allow", "deny"], "allow", where) == "deny";
        rule.ops = NameSet.ofOps(c.strList(r, "ops", where));
        rule.dbs = NameSet.of(c.strList(r, "dbs", where));
        rule.colls = NameSet.of(c.strList(r, "collections", where));
        const f = c.obj(r, "field", where);
        if (f !== null) {
          const fw = where + "field.";
          c.keys(f, ["path", "regex", "flags", "equals", "exists"], fw);
          const p = new FieldPred();
          p.path = c.str(f, "path", "", fw);
          const pathErr = checkPath(p.path);
          if (pathErr.length > 0) c.fail(fw + "path: " + pathErr);
          let n = 0;
          if (f.has("regex")) {
            n++;
            p.kind = P_REGEX;
            const rx = new Regex(c.str(f, "regex", "", fw), c.str(f, "flags", "", fw));
            if (!rx.ok) c.fail(fw + "regex: " + rx.error);
            p.rx = rx;
          } else if (f.has("flags")) c.fail(fw + "flags only goes with regex");
          if (f.has("equals")) {
            n++;
            p.kind = P_EQUALS;
            const e = f.get("equals")!;
            if (e.isArr || e.isObj) c.fail(fw + "equals must be a string, number, boolean or null");
            p.eq = e;
          }
          if (f.has("exists")) {
            n++;
            p.kind = P_EXISTS;
            p.exists = c.bool(f, "exists", true, fw);
          }
          if (n != 1) c.fail(fw + "needs exactly one of regex, equals, exists");
          rule.field = p;
        }
        out.push(rule);
      }
    }
    if (!c.ok) { log.error("filter: bad config: " + c.error); return false; }
    this.rules = out;
    return true;
  }

  onRequest(ctx: Context): Action {
    const rules = this.rules;
    let cmd: BsonDoc | null = null;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i];
      if (!inSet(r.ops, ctx.op) || !inSet(r.dbs, ctx.db) || !inSet(r.colls, ctx.collection)) continue;
      const f = r.field;
      if (f !== null) {
        if (cmd === null) {
          cmd = BsonDoc.fromBytes(ctx.body());
          if (cmd === null) return ctx.reject(13, "Unauthorized", "filter: unreadable command document");
        }
        const m = this.fieldMatches(f, cmd);
        if (m < 0) return ctx.reject(13, "Unauthorized", "denied by filter rule \"" + r.name + "\": value of " + f.path + " too long to evaluate");
        if (m == 0) continue;
      }
      if (r.deny) return ctx.reject(13, "Unauthorized", "denied by filter rule \"" + r.name + "\" (" + ctx.op + " on " + ctx.db + "." + ctx.collection + ")");
      return Action.Continue;
    }
    if (this.defaultDeny) return ctx.reject(13, "Unauthorized", "denied by filter default policy: no rule allows " + ctx.op + " on " + ctx.db + "." + ctx.collection);
    return Action.Continue;
  }

  /** 1 match, 0 no match, -1 the regex could not be evaluated (input too long). */
  fieldMatches(f: FieldPred, cmd: BsonDoc): i32 {
    const vals = valuesAt(cmd, f.path);
    if (f.kind == P_EXISTS) return (vals.length > 0) == f.exists ? 1 : 0;
    for (let i = 0; i < vals.length; i++) {
      const v = vals[i];
      if (f.kind == P_EQUALS) {
        if (bsonEquals(v, f.eq)) return 1;
        if (v.type == BsonType.ARRAY) {
          const it = v.asArray().iter();
          while (it.next()) if (bsonEquals(it.value, f.eq)) return 1;
        }
      } else {
        const m = this.regexOn(f.rx!, v);
        if (m != 0) return m;
      }
    }
    return 0;
  }

  regexOn(rx: Regex, v: BsonValue): i32 {
    if (v.type == BsonType.STRING) {
      const s = subop("regex.eval");
      const ok = rx.test(v.asString());
      s.end();
      if (rx.overflow) return -1;
      return ok ? 1 : 0;
    }
    if (v.type == BsonType.ARRAY) {
      const it = v.asArray().iter();
      while (it.next()) {
        const e = it.value;
        if (e.type != BsonType.STRING) continue;
        const s = subop("regex.eval");
        const ok = rx.test(e.asString());
        s.end();
        if (rx.overflow) return -1;
        if (ok) return 1;
      }
    }
    return 0;
  }
}

registerStep(new Filter());
export * from "../../../sdk/assembly/exports";
