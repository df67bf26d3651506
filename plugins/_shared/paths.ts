// Dotted paths with a "*" wildcard segment: "documents.*.email" visits every element of the
// `documents` array (or every field of a document). Without "*", it is BsonDoc.path().
import { BsonDoc, BsonValue, BsonType } from "../../sdk/assembly/bson/index";

/** True when the path has a "*" segment. */
export function hasWildcard(path: string): bool {
  return path == "*" || path.startsWith("*.") || path.endsWith(".*") || path.includes(".*.");
}

/** Every value at `path` (wildcards expanded), in document order. */
export function valuesAt(doc: BsonDoc, path: string): BsonValue[] {
  const out = new Array<BsonValue>();
  collect(doc, path, out);
  return out;
}

function collect(doc: BsonDoc, path: string, out: BsonValue[]): void {
  const star = starIndex(path);
  if (star < 0) {
    const v = doc.path(path);
    if (v !== null) out.push(v);
    return;
  }
  // path = prefix + "*" + rest
  const prefix = star == 0 ? "" : path.substring(0, star - 1);
  const rest = star + 1 >= path.length ? "" : path.substring(star + 2);
  let container: BsonDoc;
  if (prefix.length == 0) container = doc;
  else {
    const v = doc.path(prefix);
    if (v === null || (v.type != BsonType.DOCUMENT && v.type != BsonType.ARRAY)) return;
    container = v.asDoc();
  }
  const it = container.iter();
  while (it.next()) {
    const el = it.value;
    if (rest.length == 0) {
      const copy = BsonValue.parse(el.elementPtr, el.parentEnd, el.owner);
      if (copy !== null) out.push(copy);
    } else if (el.type == BsonType.DOCUMENT || el.type == BsonType.ARRAY) {
      collect(el.asDoc(), rest, out);
    }
  }
}

/** Concrete paths (wildcards replaced by the element names that exist) for edits. */
export function expandPaths(doc: BsonDoc, path: string): string[] {
  const out = new Array<string>();
  expand(doc, path, "", out);
  return out;
}

function expand(doc: BsonDoc, path: string, base: string, out: string[]): void {
  const star = starIndex(path);
  if (star < 0) { out.push(base + path); return; }
  const prefix = star == 0 ? "" : path.substring(0, star - 1);
  const rest = star + 1 >= path.length ? "" : path.substring(star + 2);
  let container: BsonDoc;
  if (prefix.length == 0) container = doc;
  else {
    const v = doc.path(prefix);
    if (v === null || (v.type != BsonType.DOCUMENT && v.type != BsonType.ARRAY)) return;
    container = v.asDoc();
  }
  const pre = base + (prefix.length == 0 ? "" : prefix + ".");
  const it = container.iter();
  while (it.next()) {
    const el = it.value;
    const name = el.name;
    if (rest.length == 0) out.push(pre + name);
    else if (el.type == BsonType.DOCUMENT || el.type == BsonType.ARRAY) expand(el.asDoc(), rest, pre + name + ".", out);
  }
}

/** Index of the first "*" segment, or -1. */
function starIndex(path: string): i32 {
  let from = 0;
  while (true) {
    let to = path.indexOf(".", from);
    if (to < 0) to = path.length;
    if (to - from == 1 && path.charCodeAt(from) == 0x2a) return from;
    if (to >= path.length) return -1;
    from = to + 1;
  }
}

/** Checks a path for empty segments; "" when fine, else the problem. */
export function checkPath(path: string): string {
  if (path.length == 0) return "empty path";
  const parts = path.split(".");
  for (let i = 0; i < parts.length; i++) if (parts[i].length == 0) return "empty segment in path \"" + path + "\"";
  return "";
}
