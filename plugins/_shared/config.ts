// Config validation helpers shared by the built-in steps. Each helper records the first problem
// in `Conf.error` (with the JSON path) and returns a neutral value, so onConfigure can read every
// key in a straight line and refuse once at the end:
//   const c = Conf.parse(text); const x = c.num(c.root, "max_rps", -1, "max_rps"); ...
//   if (!c.ok) { log.error("rate_limit: " + c.error); return false; }
import { JValue, JKind, parseJson, jsonError } from "./json";

export class Conf {
  error: string = "";
  root: JValue = new JValue();

  static parse(text: string): Conf {
    const c = new Conf();
    const t = text.trim();
    if (t.length == 0) { c.root.kind = JKind.Obj; return c; }
    const v = parseJson(t);
    if (v === null) { c.fail("config is not valid JSON: " + jsonError()); return c; }
    if (!v.isObj) { c.fail("config must be a JSON object, got " + v.kindName()); return c; }
    c.root = v;
    return c;
  }

  get ok(): bool { return this.error.length == 0; }

  fail(msg: string): void { if (this.error.length == 0) this.error = msg; }

  /** Refuses keys not in `allowed` (catches typos such as "max_rp"). */
  keys(obj: JValue, allowed: string[], where: string): void {
    if (!obj.isObj) return;
    for (let i = 0; i < obj.keys.length; i++) {
      if (!allowed.includes(obj.keys[i])) this.fail(where + "unknown key \"" + obj.keys[i] + "\" (allowed: " + allowed.join(", ") + ")");
    }
  }

  obj(obj: JValue, key: string, where: string): JValue | null {
    const v = obj.get(key);
    if (v === null) return null;
    if (!v.isObj) { this.fail(where + key + " must be an object, got " + v.kindName()); return null; }
    return v;
  }

  arr(obj: JValue, key: string, where: string): JValue[] | null {
    const v = obj.get(key);
    if (v === null) return null;
    if (!v.isArr) { this.fail(where + key + " must be an array, got " + v.kindName()); return null; }
    return v.items;
  }

  str(obj: JValue, key: string, def: string, where: string): string {
    const v = obj.get(key);
    if (v === null) return def;
    if (!v.isStr) { this.fail(where + key + " must be a string, got " + v.kindName()); return def; }
    return v.s;
  }

  /** A string that must be one of `allowed`. */
  oneOf(obj: JValue, key: string, allowed: string[], def: string, where: string): string {
    const s = this.str(obj, key, def, where);
    if (!allowed.includes(s)) { this.fail(where + key + " must be one of " + allowed.join("|") + ", got \"" + s + "\""); return def; }
    return s;
  }

  num(obj: JValue, key: string, def: f64, where: string): f64 {
    const v = obj.get(key);
    if (v === null) return def;
    if (!v.isNum) { this.fail(where + key + " must be a number, got " + v.kindName()); return def; }
    return v.n;
  }

  bool(obj: JValue, key: string, def: bool, where: string): bool {
    const v = obj.get(key);
    if (v === null) return def;
    if (!v.isBool) { this.fail(where + key + " must be a boolean, got " + v.kindName()); return def; }
    return v.b;
  }

  /** A list of non-empty strings; null when absent. */
  strList(obj: JValue, key: string, where: string): string[] | null {
    const items = this.arr(obj, key, where);
    if (items === null) return null;
    const out = new Array<string>();
    for (let i = 0; i < items.length; i++) {
      const it = items[i];
      if (!it.isStr || it.s.length == 0) { this.fail(where + key + "[" + i.toString() + "] must be a non-empty string"); return null; }
      out.push(it.s);
    }
    return out;
  }
}
