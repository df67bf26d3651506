// transform: rename / set / unset / redact fields of commands (request) and of result documents
// (response: every document of cursor.firstBatch / cursor.nextBatch, and `value` of
// findAndModify). Paths are dotted, with "*" for every element ("documents.*.ssn").
import { Step, Phases, Context, Action, registerStep, log, subop } from "../../../sdk/assembly/index";
import { BsonDoc, BsonType, BsonWriter, setValue, unset, rename, redact } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { JValue } from "../../_shared/json";
import { NameSet, inSet } from "../../_shared/match";
import { checkPath, hasWildcard, expandPaths } from "../../_shared/paths";

const E_RENAME = 0;
const E_SET = 1;
const E_UNSET = 2;
const E_REDACT = 3;

class Edit {
  kind: i32 = E_SET;
  path: string = "";
  wild: bool = false;
  to: string = "";
  type: u8 = 0;
  raw: Uint8Array = new Uint8Array(0);
  replacement: string = "***";
  ops: NameSet | null = null;
  colls: NameSet | null = null;
  /** UTF-8 of the path's last named segment + NUL: a document without these bytes has no such
   *  field, so the edit cannot apply (null: no such pre-check, e.g. `set` or a path ending in *). */
  needle: Uint8Array | null = null;
}

function needleOf(e: Edit): Uint8Array | null {
  if (e.kind == E_SET) return null;
  const dot = e.path.lastIndexOf(".");
  const last = e.path.substring(dot + 1);
  if (last == "*" || last.length == 0) return null;
  const utf8 = String.UTF8.encode(last, true); // with the NUL that ends a BSON element name
  return Uint8Array.wrap(utf8);
}

/** Can any edit in scope apply to this body? Asks the host to search the body for each edit's
 *  needle, so a body no edit touches is never copied into the plugin. */
function anyApplies(ctx: Context, edits: Edit[], op: string, coll: string): bool {
  for (let i = 0; i < edits.length; i++) {
    const e = edits[i];
    if (!inSet(e.ops, op) || !inSet(e.colls, coll)) continue;
    const n = e.needle;
    if (n === null || ctx.bodyFind(n) >= 0) return true;
  }
  return false;
}

/** BSON type + raw value bytes of a JSON value (integers → int32/int64, others → double). */
function writeJson(w: BsonWriter, name: string, v: JValue): void {
  if (v.isStr) w.writeString(name, v.s);
  else if (v.isBool) w.writeBool(name, v.b);
  else if (v.isNull) w.writeNull(name);
  else if (v.isNum) {
    if (v.isInt && v.n >= -2147483648 && v.n <= 2147483647) w.writeI32(name, <i32>v.n);
    else if (v.isInt) w.writeI64(name, <i64>v.n);
    else w.writeDouble(name, v.n);
  } else if (v.isArr) {
    w.startArray(name);
    for (let i = 0; i < v.items.length; i++) writeJson(w, "", v.items[i]);
    w.endArray();
  } else {
    w.startDoc(name);
    for (let i = 0; i < v.keys.length; i++) writeJson(w, v.keys[i], v.items[i]);
    w.endDoc();
  }
}

/** Encodes {"v": value} and extracts the element's type and raw value bytes. */
function encodeValue(e: Edit, v: JValue): void {
  const w = new BsonWriter(64);
  w.startDoc();
  writeJson(w, "v", v);
  w.endDoc();
  const doc = BsonDoc.fromBytes(w.finish())!;
  const el = doc.firstElement()!;
  e.type = el.type;
  e.raw = el.rawValue();
}

function parseEdits(c: Conf, list: JValue[] | null, where: string): Edit[] {
  const out = new Array<Edit>();
  if (list === null) return out;
  for (let i = 0; i < list.length && c.ok; i++) {
    const w = where + "[" + i.toString() + "].";
    const r = list[i];
    if (!r.isObj) { c.fail(where + "[" + i.toString() + "] must be an object"); break; }
    c.keys(r, ["op", "path", "to", "value", "replacement", "collections", "ops"], w);
    const e = new Edit();
    const op = c.oneOf(r, "op", ["rename", "set", "unset", "redact"], "set", w);
    if (!r.has("op")) c.fail(w + "op is required (rename|set|unset|redact)");
    e.kind = op == "rename" ? E_RENAME : op == "unset" ? E_UNSET : op == "redact" ? E_REDACT : E_SET;
    e.path = c.str(r, "path", "", w);
    const pe = checkPath(e.path);
    if (pe.length > 0) c.fail(w + "path: " + pe);
    e.wild = hasWildcard(e.path);
    e.ops = NameSet.ofOps(c.strList(r, "ops", w));
    e.colls = NameSet.of(c.strList(r, "collections", w));
    if (e.kind == E_RENAME) {
      e.to = c.str(r, "to", "", w);
      if (e.to.length == 0 || e.to.includes(".")) c.fail(w + "to must be a plain field name (no dots)");
    } else if (r.has("to")) c.fail(w + "to only goes with rename");
    if (e.kind == E_SET) {
      const v = r.get("value");
      if (v === null) c.fail(w + "value is required for set");
      else encodeValue(e, v);
    } else if (r.has("value")) c.fail(w + "value only goes with set");
    if (e.kind == E_REDACT) e.replacement = c.str(r, "replacement", "***", w);
    else if (r.has("replacement")) c.fail(w + "replacement only goes with redact");
    e.needle = needleOf(e);
    out.push(e);
  }
  return out;
}

/**
 * Cheap pre-check on a view of the document (no copy): can any in-scope edit change it? A `set`
 * or a wildcard path always may; otherwise only an edit whose path is present. If no edit applies
 * to the original document, none applies after the others either (nothing changed), so `false`
 * means applyAll would return null.
 */
function mightChange(edits: Edit[], d: BsonDoc, op: string, coll: string): bool {
  for (let i = 0; i < edits.length; i++) {
    const e = edits[i];
    if (!inSet(e.ops, op) || !inSet(e.colls, coll)) continue;
    if (e.kind == E_SET || e.wild) return true;
    if (d.path(e.path) !== null) return true;
  }
  return false;
}

/** Applies the edits that are in scope to one document; null when nothing changed. */
function applyAll(edits: Edit[], doc: Uint8Array, op: string, coll: string): Uint8Array | null {
  let cur = doc;
  let changed = false;
  for (let i = 0; i < edits.length; i++) {
    const e = edits[i];
    if (!inSet(e.ops, op) || !inSet(e.colls, coll)) continue;
    const d = BsonDoc.fromBytes(cur);
    if (d === null) return null;
    let paths: string[];
    if (e.wild) paths = expandPaths(d, e.path);
    else { paths = new Array<string>(); paths.push(e.path); }
    for (let j = 0; j < paths.length; j++) {
      const dd = BsonDoc.fromBytes(cur)!;
      const p = paths[j];
      let next: Uint8Array | null = null;
      if (e.kind == E_SET) next = setValue(dd, p, e.type, e.raw);
      else {
        if (dd.path(p) === null) continue; // absent: nothing to do
        if (e.kind == E_UNSET) next = unset(dd, p);
        else if (e.kind == E_RENAME) next = rename(dd, p, e.to);
        else {
          const s = subop("field.redact");
          next = redact(dd, p, e.replacement);
          s.end();
        }
      }
      if (next !== null) { cur = next; changed = true; }
    }
  }
  return changed ? cur : null;
}

class Transform extends Step {
  req: Edit[] = [];
  resp: Edit[] = [];
  /** The rewritten reply is built here (kept across calls: no allocation once it has grown). */
  out: BsonWriter = new BsonWriter(1024);

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    c.keys(c.root, ["request", "response"], "");
    const req = parseEdits(c, c.arr(c.root, "request", ""), "request");
    const resp = parseEdits(c, c.arr(c.root, "response", ""), "response");
    if (c.ok && req.length == 0 && resp.length == 0) c.fail("needs request or response edits");
    if (!c.ok) { log.error("transform: bad config: " + c.error); return false; }
    this.req = req;
    this.resp = resp;
    this.phases = (req.length > 0 ? Phases.Request : 0) | (resp.length > 0 ? Phases.Response : 0);
    return true;
  }

  onRequest(ctx: Context): Action {
    if (this.req.length == 0) return Action.Continue;
    if (!anyApplies(ctx, this.req, ctx.op, ctx.collection)) return Action.Continue;
    const out = applyAll(this.req, ctx.body(), ctx.op, ctx.collection);
    if (out !== null) ctx.replaceBody(out);
    return Action.Continue;
  }

  onResponse(ctx: Context): Action {
    const edits = this.resp;
    if (edits.length == 0) return Action.Continue;
    const op = ctx.op;
    const coll = ctx.collection;
    // anything in scope that can apply to these bytes at all?
    if (!anyApplies(ctx, edits, op, coll)) return Action.Continue;
    const s = subop("bson.deserialize");
    const body = ctx.body();
    const reply = BsonDoc.fromBytes(body);
    let batchName = "";
    let batch: BsonDoc | null = null;
    let value: BsonDoc | null = null;
    if (reply !== null) {
      const cur = reply.get("cursor");
      if (cur !== null && cur.type == BsonType.DOCUMENT) {
        const cd = cur.asDoc();
        let b = cd.get("firstBatch");
        batchName = "cursor.firstBatch";
        if (b === null) { b = cd.get("nextBatch"); batchName = "cursor.nextBatch"; }
        if (b !== null && b.type == BsonType.ARRAY) batch = b.asArray();
      }
      const v = reply.get("value");
      if (v !== null && v.type == BsonType.DOCUMENT) value = v.asDoc();
    }
    s.end();
    if (reply === null) return Action.Continue;
    const batchIsFirst = batchName == "cursor.firstBatch";
    const valueMay = value !== null && mightChange(edits, value, op, coll);
    if (batch === null && !valueMay) return Action.Continue;
    // One pass: the reply is rewritten into a reused writer; elements no edit touches are copied
    // as raw bytes, and the host gets the writer's bytes only if some document changed.
    const w = this.out;
    w.reset();
    w.startDoc();
    let changed = false;
    const top = reply.iter();
    while (top.next()) {
      const el = top.value;
      if (batch !== null && el.type == BsonType.DOCUMENT && el.nameEquals("cursor")) {
        w.startDoc("cursor");
        const ci = el.asDoc().iter();
        while (ci.next()) {
          const c = ci.value;
          if (c.type == BsonType.ARRAY && c.nameEquals(batchIsFirst ? "firstBatch" : "nextBatch")) {
            w.startArray(batchIsFirst ? "firstBatch" : "nextBatch");
            const it = c.asArray().iter();
            while (it.next()) {
              const d = it.value;
              if (d.type == BsonType.DOCUMENT && mightChange(edits, d.asDoc(), op, coll)) {
                const edited = applyAll(edits, d.asDoc().toBytes(), op, coll);
                if (edited !== null) { changed = true; w.writeDocBytes("", edited); continue; }
              }
              w.appendRawElement(d);
            }
            w.endArray();
          } else w.appendRawElement(c);
        }
        w.endDoc();
      } else if (valueMay && el.type == BsonType.DOCUMENT && el.nameEquals("value")) {
        const edited = applyAll(edits, value!.toBytes(), op, coll);
        if (edited !== null) { changed = true; w.writeDocBytes("value", edited); }
        else w.appendRawElement(el);
      } else w.appendRawElement(el);
    }
    w.endDoc();
    if (changed) ctx.replaceBodyAt(w.dataPtr, w.length);
    return Action.Continue;
  }
}

registerStep(new Transform());
export * from "../../../sdk/assembly/exports";
