// redact: replaces configured fields of the documents a read returns with a fixed string.
//
//   config: { "fields": ["ssn", "card.number"], "replacement": "***", "collections": ["users"] }
//
// Response phase only. Touches the documents of `cursor.firstBatch` / `cursor.nextBatch` (find,
// aggregate, getMore) and `value` (findAndModify); every other reply passes untouched. Paths are
// dotted; inside an array a segment must be an index ("cards.0.number"), as in the SDK's edit
// helpers. `collections` absent or empty means every collection.
import { Step, Context, Action, registerStep, Counter, subop, log } from "../../../sdk/assembly/index";
import { BsonDoc, BsonType, BsonValue, BsonWriter, redact } from "../../../sdk/assembly/bson/index";
import { JSON } from "assemblyscript-json/assembly";

let fields: string[] = [];
let replacement = "***";
let collections: string[] = [];
let redactions: Counter | null = null;
/** Redactions done by the reply being rewritten (added to the counter once per reply). */
let done = 0;

class RedactStep extends Step {
  onConfigure(config: string): bool {
    const root = JSON.parse(config);
    if (!root.isObj) return refuse("config must be an object");
    const obj = <JSON.Obj>root;
    const f = obj.get("fields");
    if (f === null) return refuse("config.fields is required: a non-empty array of field paths");
    const paths = f.isArr ? readStrings(<JSON.Arr>f) : null;
    if (paths === null || paths.length == 0) return refuse("config.fields must be a non-empty array of non-empty strings");
    const r = obj.get("replacement");
    if (r !== null) {
      if (!r.isString) return refuse("config.replacement must be a string");
      replacement = (<JSON.Str>r).valueOf();
    }
    const c = obj.get("collections");
    if (c !== null) {
      const names = c.isArr ? readStrings(<JSON.Arr>c) : null;
      if (names === null) return refuse("config.collections must be an array of collection names");
      collections = names;
    }
    fields = paths;
    redactions = new Counter("proxy_plugin_redact_fields_total");
    return true;
  }

  onResponse(ctx: Context): Action {
    const op = ctx.op;
    const isFam = op == "findAndModify" || op == "findandmodify";
    if (!isFam && op != "find" && op != "aggregate" && op != "getMore") return Action.Continue;
    if (collections.length > 0 && !collections.includes(ctx.collection)) return Action.Continue;
    const reply = BsonDoc.fromBytes(ctx.body());
    if (reply === null) return Action.Continue;

    const s = subop("field.redact");
    done = 0;
    const out = isFam ? rewriteValue(reply) : rewriteCursor(reply);
    if (done > 0) {
      ctx.replaceBody(out);
      redactions!.inc(<f64>done);
    }
    s.end();
    return Action.Continue;
  }
}

function refuse(why: string): bool {
  log.error("redact: " + why);
  return false;
}

/** The strings of a JSON array, or null when an item is not a non-empty string. */
function readStrings(a: JSON.Arr): string[] | null {
  const items = a.valueOf();
  const out = new Array<string>();
  for (let i = 0; i < items.length; i++) {
    const v = items[i];
    if (!v.isString) return null;
    const s = (<JSON.Str>v).valueOf();
    if (s.length == 0) return null;
    out.push(s);
  }
  return out;
}

/** Copies `reply`, rewriting the documents of cursor.firstBatch / cursor.nextBatch. */
function rewriteCursor(reply: BsonDoc): Uint8Array {
  const w = new BsonWriter(reply.length + 64);
  w.startDoc();
  const it = reply.iter();
  while (it.next()) {
    const v = it.value;
    if (v.type != BsonType.DOCUMENT || !v.nameEquals("cursor")) { w.appendRawElement(v); continue; }
    w.startDoc("cursor");
    const ci = v.asDoc().iter();
    while (ci.next()) {
      const b = ci.value;
      if (b.type != BsonType.ARRAY || !(b.nameEquals("firstBatch") || b.nameEquals("nextBatch"))) { w.appendRawElement(b); continue; }
      w.startArray(b.name);
      const bi = b.asArray().iter();
      while (bi.next()) writeRedacted(w, "", bi.value);
      w.endArray();
    }
    w.endDoc();
  }
  w.endDoc();
  return w.finish();
}

/** Copies a findAndModify reply, rewriting its `value` document. */
function rewriteValue(reply: BsonDoc): Uint8Array {
  const w = new BsonWriter(reply.length + 64);
  w.startDoc();
  const it = reply.iter();
  while (it.next()) {
    const v = it.value;
    if (v.nameEquals("value")) writeRedacted(w, "value", v);
    else w.appendRawElement(v);
  }
  w.endDoc();
  return w.finish();
}

/** Writes element `v` under `name` (ignored inside arrays), redacted when it is a document. */
function writeRedacted(w: BsonWriter, name: string, v: BsonValue): void {
  if (v.type != BsonType.DOCUMENT) { w.appendRawElement(v); return; }
  let doc = v.asDoc();
  let changed: Uint8Array | null = null;
  for (let i = 0; i < fields.length; i++) {
    const path = unchecked(fields[i]);
    if (doc.path(path) === null) continue;
    const next = redact(doc, path, replacement);
    if (next === null) continue; // malformed along the path: leave this field as it is
    const view = BsonDoc.fromBytes(next);
    if (view === null) continue;
    changed = next;
    doc = view;
    done++;
  }
  if (changed === null) w.appendRawElement(v);
  else w.writeDocBytes(name, changed);
}

registerStep(new RedactStep());
export * from "../../../sdk/assembly/exports";
