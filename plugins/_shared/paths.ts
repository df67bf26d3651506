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
  const split = splitAt(doc, path, star);
  if (split === null) return;
  const it = split.container.iter();
  while (it.next()) {
    const el = it.value;
    if (split.rest.length == 0) {
      const copy = BsonValue.parse(el.elementPtr, el.parentEnd, el.owner);
      if (copy !== null) out.push(copy);
    } else if (el.type == BsonType.DOCUMENT || el.type == BsonType.ARRAY) {
      collect(el.asDoc(), split.rest, out);
    }
  }
}

/** A path split at its first "*" segment: the container the star ranges over, and what follows. */
class StarSplit {
  container: BsonDoc;
  prefix: string;
  rest: string;
  constructor(container: BsonDoc, prefix: string, rest: string) {
    this.container = container; this.prefix = prefix; this.rest = rest;
  }
}

/** null when the prefix before the star names no document or array. */
function splitAt(doc: BsonDoc, path: string, star: i32): StarSplit | null {
  const prefix = star == 0 ? "" : path.substring(0, star - 1);
  const rest = star + 1 >= path.length ? "" : path.substring(star + 2);
  if (prefix.length == 0) return new StarSplit(doc, prefix, rest);
  const v = doc.path(prefix);
  if (v === null || (v.type != BsonType.DOCUMENT && v.type != BsonType.ARRAY)) return null;
  return new StarSplit(v.asDoc(), prefix, rest);
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
  const split = splitAt(doc, path, star);
  if (split === null) return;
  const pre = base + (split.prefix.length == 0 ? "" : split.prefix + ".");
  const it = split.container.iter();
  while (it.next()) {
    const el = it.value;
    const name = el.name;
    if (split.rest.length == 0) out.push(pre + name);
    else if (el.type == BsonType.DOCUMENT || el.type == BsonType.ARRAY) expand(el.asDoc(), split.rest, pre + name + ".", out);
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
