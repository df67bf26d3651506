// Which generation counters a write bumps: "n:<db>.<coll>" for a namespace, "d:<db>" for a whole
// database (see generations.ts).
import { Context } from "../../../sdk/assembly/index";
import { BsonDoc, BsonValue, BsonType } from "../../../sdk/assembly/bson/index";
import { pipelineWrites } from "../../_shared/match";

/** kv keys of the generation counters write `cmd` must bump. */
export function invalidationTargets(ctx: Context, cmd: BsonDoc): string[] {
  const out = new Array<string>();
  const op = ctx.op;
  const db = ctx.db;
  if (op == "dropDatabase") { out.push("d:" + db); return out; }
  if (op == "renameCollection") {
    const from = cmd.get("renameCollection");
    const to = cmd.get("to");
    if (from !== null && from.type == BsonType.STRING) out.push("n:" + from.asString());
    if (to !== null && to.type == BsonType.STRING) out.push("n:" + to.asString());
    return out;
  }
  if (op == "bulkWrite") {
    const ns = cmd.get("nsInfo");
    if (ns !== null && ns.type == BsonType.ARRAY) {
      const it = ns.asArray().iter();
      while (it.next()) {
        if (it.value.type != BsonType.DOCUMENT) continue;
        const n = it.value.asDoc().get("ns");
        if (n !== null && n.type == BsonType.STRING) out.push("n:" + n.asString());
      }
    }
    return out;
  }
  if (op == "aggregate" && pipelineWrites(cmd)) {
    // $out / $merge target: a string is a collection of this database; a document may name
    // another database — bump that whole database (coarse, safe).
    const p = cmd.get("pipeline")!.asArray();
    const it = p.iter();
    while (it.next()) {
      if (it.value.type != BsonType.DOCUMENT) continue;
      const st = it.value.asDoc().firstElement();
      if (st === null) continue;
      let tgt: BsonValue | null = null;
      if (st.nameEquals("$out")) tgt = st;
      else if (st.nameEquals("$merge")) tgt = st.type == BsonType.DOCUMENT ? st.asDoc().get("into") : st;
      if (tgt === null) continue;
      if (tgt.type == BsonType.STRING) out.push("n:" + db + "." + tgt.asString());
      else if (tgt.type == BsonType.DOCUMENT) {
        const d = tgt.asDoc().get("db");
        out.push("d:" + (d !== null && d.type == BsonType.STRING ? d.asString() : db));
      }
    }
    return out;
  }
  if (op == "mapReduce") { out.push("d:" + db); return out; }
  const coll = ctx.collection;
  out.push(coll.length > 0 ? "n:" + db + "." + coll : "d:" + db);
  return out;
}
