// Name lists for rule scoping (ops, dbs, collections) and the operation classification the
// built-ins share.
import { BsonDoc, BsonType } from "../../sdk/assembly/bson/index";

/** A list of names: exact names, "*" (anything) or a prefix pattern "logs_*". Null list = any. */
export class NameSet {
  exact: string[] = [];
  prefixes: string[] = [];
  any: bool = false;
  /** The last name asked about and the answer: the SDK hands out the same op / db / collection
   *  string object while it repeats (and strings are immutable), so a repeated request's check is
   *  one pointer compare instead of a scan with string compares. */
  private lastName: string | null = null;
  private lastHas: bool = false;

  static of(list: string[] | null): NameSet | null {
    if (list === null) return null;
    const s = new NameSet();
    for (let i = 0; i < list.length; i++) {
      const n = list[i];
      if (n == "*") s.any = true;
      else if (n.endsWith("*")) s.prefixes.push(n.substring(0, n.length - 1));
      else s.exact.push(n);
    }
    return s;
  }

  /**
   * A list of command names: each exact name that mongod also accepts under another spelling
   * (OP_ALIASES) brings that spelling with it, so a rule on `findAndModify` also holds for a
   * client that sends `findandmodify` — the upstream runs the same command either way.
   */
  static ofOps(list: string[] | null): NameSet | null {
    const s = NameSet.of(list);
    if (s === null) return null;
    const n = s.exact.length;
    for (let i = 0; i < n; i++) {
      const alias = opAlias(s.exact[i]);
      if (alias !== null && !s.exact.includes(alias)) s.exact.push(alias);
    }
    return s;
  }

  has(name: string): bool {
    if (this.any) return true;
    if (changetype<usize>(name) == changetype<usize>(this.lastName)) return this.lastHas;
    const r = this.scan(name);
    this.lastName = name;
    this.lastHas = r;
    return r;
  }

  private scan(name: string): bool {
    for (let i = 0; i < this.exact.length; i++) if (this.exact[i] == name) return true;
    for (let i = 0; i < this.prefixes.length; i++) if (name.startsWith(this.prefixes[i])) return true;
    return false;
  }
}

/** Commands mongod runs under two names (its Command alias list), in pairs; the host's list is runtime/config/pipeline-match.ts's COMMAND_ALIASES. */
const OP_ALIASES: string[] = [
  "findAndModify", "findandmodify", "isMaster", "ismaster", "buildInfo", "buildinfo", "dbStats", "dbstats",
  "collStats", "collstats", "mapReduce", "mapreduce", "getLastError", "getlasterror", "dataSize", "datasize",
];

/** The other spelling of a command name mongod accepts under two, or null. */
export function opAlias(name: string): string | null {
  for (let i = 0; i < OP_ALIASES.length; i++) {
    if (OP_ALIASES[i] == name) return OP_ALIASES[i ^ 1];
  }
  return null;
}

/** True when `set` is null (no constraint) or contains `name`. */
export function inSet(set: NameSet | null, name: string): bool {
  return changetype<usize>(set) == 0 || set.has(name);
}

/** Commands that only read data. */
export const READ_OPS: string[] = [
  "find", "aggregate", "count", "distinct", "getMore", "killCursors", "listCollections", "listIndexes",
  "listDatabases", "dbStats", "collStats", "explain", "geoNear", "geoSearch", "dataSize",
  "listSearchIndexes", "validate",
];
/** Commands that change data or metadata. Anything not READ_OPS nor NEUTRAL_OPS is treated as a write. */
export const WRITE_OPS: string[] = [
  "insert", "update", "delete", "findAndModify", "findandmodify", "create", "drop", "dropDatabase",
  "createIndexes", "dropIndexes", "renameCollection", "collMod", "bulkWrite", "mapReduce",
  "convertToCapped", "cloneCollectionAsCapped", "compact",
];
/** Commands that touch no user data (session and server housekeeping): always allowed by auth. */
export const NEUTRAL_OPS: string[] = [
  "ping", "buildInfo", "buildinfo", "hello", "isMaster", "ismaster", "endSessions", "startSession",
  "refreshSessions", "killSessions", "commitTransaction", "abortTransaction", "connectionStatus",
  "getLastError", "getParameter", "whatsmyuri", "hostInfo", "serverStatus", "logout",
];

/** True when an aggregate pipeline has a $out or $merge stage (it writes). */
export function pipelineWrites(cmd: BsonDoc): bool {
  const p = cmd.get("pipeline");
  if (p === null || p.type != BsonType.ARRAY) return false;
  const it = p.asArray().iter();
  while (it.next()) {
    const st = it.value;
    if (st.type != BsonType.DOCUMENT) continue;
    const first = st.asDoc().firstElement();
    if (first !== null && (first.nameEquals("$out") || first.nameEquals("$merge"))) return true;
  }
  return false;
}

/** "read", "write" or "neutral" for a command; aggregate with $out/$merge is a write. */
export function classify(op: string, cmd: BsonDoc | null): string {
  if (NEUTRAL_OPS.includes(op)) return "neutral";
  if (op == "aggregate") return cmd !== null && pipelineWrites(cmd) ? "write" : "read";
  if (READ_OPS.includes(op)) return "read";
  return "write";
}

/** Host part of a client address: "10.0.0.1:5000" → "10.0.0.1", "[::1]:5000" → "::1". */
export function hostOf(addr: string): string {
  if (addr.startsWith("[")) {
    const e = addr.indexOf("]");
    return e > 0 ? addr.substring(1, e) : addr;
  }
  const c = addr.lastIndexOf(":");
  if (c > 0 && addr.indexOf(":") == c) return addr.substring(0, c);
  return addr;
}
