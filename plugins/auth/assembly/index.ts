// auth: who may run what. provider "static" (allowed users/apps, per-database read/readWrite
// permissions) or "hmac_jwt" (an HS256 JWT sent in a command field, claims `sub` and `dbs`).
// Denial → code 13 Unauthorized. See ../README.md and docs/steps.md.
import { Step, Phases, Context, Action, registerStep, log, nowNs, property } from "../../../sdk/assembly/index";
import { BsonDoc, BsonType, unset } from "../../../sdk/assembly/bson/index";
import { Conf } from "../../_shared/config";
import { JValue, parseJson } from "../../_shared/json";
import { classify, pipelineWrites } from "../../_shared/match";
import { sha256, hmacSha256, utf8, toHex, equalBytes, base64UrlDecode } from "./sha256";

const PERM_NONE = 0;
const PERM_READ = 1;
const PERM_RW = 2;

/** Proposed host property (not in the ABI yet): wall clock, Unix milliseconds as a decimal string. */
const PROPERTY_WALL_CLOCK_MS = 11;

class Perms {
  dbs: string[] = [];
  levels: i32[] = [];
  /** Level for `db` ("*" entry as fallback). */
  level(db: string): i32 {
    let star = PERM_NONE;
    for (let i = 0; i < this.dbs.length; i++) {
      if (this.dbs[i] == db) return this.levels[i];
      if (this.dbs[i] == "*") star = this.levels[i];
    }
    return star;
  }
}

function permOf(s: string): i32 {
  if (s == "read") return PERM_READ;
  if (s == "readWrite") return PERM_RW;
  return -1;
}

/** Parses {db: "read"|"readWrite"}; null with `err[0]` set on a bad value. */
function parsePerms(v: JValue, err: string[]): Perms | null {
  const p = new Perms();
  for (let i = 0; i < v.keys.length; i++) {
    const it = v.items[i];
    const lvl = it.isStr ? permOf(it.s) : -1;
    if (lvl < 0) { err[0] = "permission for db \"" + v.keys[i] + "\" must be \"read\" or \"readWrite\""; return null; }
    p.dbs.push(v.keys[i]);
    p.levels.push(lvl);
  }
  return p;
}

/** Known-answer tests of the hash code, run at configure (FIPS 180-2 B.1, RFC 4231 case 2). */
function selfTest(): bool {
  if (toHex(sha256(utf8("abc"))) != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") return false;
  if (toHex(hmacSha256(utf8("Jefe"), utf8("what do ya want for nothing?"))) != "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") return false;
  return true;
}

/** Op classes as opClass caches them (classify's strings, and aggregate: decided per command). */
const K_NEUTRAL = 0;
const K_READ = 1;
const K_WRITE = 2;
const K_AGGREGATE = 3;

class Auth extends Step {
  phases: i32 = Phases.Request;
  jwt: bool = false;
  // Per-request answers cached by the identity of the strings they were computed from: the SDK
  // hands out the same op / db / appName string while it repeats, so a repeated request costs
  // pointer compares instead of list scans with string compares.
  lastOp: string | null = null;
  lastOpKind: i32 = K_NEUTRAL;
  lastApp: string | null = null;
  lastAppAllowed: bool = false;
  lastDb: string | null = null;
  lastPerms: Perms | null = null;
  lastLevel: i32 = PERM_NONE;
  apps: string[] | null = null;
  // static
  users: string[] | null = null;
  userPerms: Array<Perms | null> = [];
  dbs: Perms | null = null;
  fromField: bool = false;
  userField: string = "$proxyUser";
  // hmac_jwt
  secret: Uint8Array = new Uint8Array(0);
  tokenField: string = "$proxyToken";
  leeway: f64 = 0;
  anchorUnix: f64 = -1;
  anchorNs: i64 = 0;

  onConfigure(text: string): bool {
    const c = Conf.parse(text);
    const root = c.root;
    const provider = c.oneOf(root, "provider", ["static", "hmac_jwt"], "static", "");
    if (c.ok && !root.has("provider")) c.fail("provider is required (static|hmac_jwt)");
    this.apps = c.strList(root, "apps", "");
    if (provider == "static") {
      c.keys(root, ["provider", "apps", "users", "dbs", "user_source", "user_field"], "");
      this.jwt = false;
      this.fromField = c.oneOf(root, "user_source", ["connection", "field"], "connection", "") == "field";
      this.userField = c.str(root, "user_field", "$proxyUser", "");
      if (this.userField.length == 0 || this.userField.includes(".")) c.fail("user_field must be a top-level field name");
      const err: string[] = [""];
      const d = c.obj(root, "dbs", "");
      this.dbs = null;
      if (d !== null) this.dbs = parsePerms(d, err);
      if (err[0].length > 0) c.fail("dbs: " + err[0]);
      const users = c.arr(root, "users", "");
      if (users !== null) {
        const names = new Array<string>();
        const perms = new Array<Perms | null>();
        for (let i = 0; i < users.length && c.ok; i++) {
          const u = users[i];
          const where = "users[" + i.toString() + "]";
          if (u.isStr && u.s.length > 0) { names.push(u.s); perms.push(null); continue; }
          if (!u.isObj) { c.fail(where + " must be a name or {name, dbs}"); break; }
          c.keys(u, ["name", "dbs"], where + ".");
          const name = c.str(u, "name", "", where + ".");
          if (name.length == 0) c.fail(where + ".name is required");
          const ud = c.obj(u, "dbs", where + ".");
          let p: Perms | null = null;
          if (ud !== null) p = parsePerms(ud, err);
          if (err[0].length > 0) c.fail(where + ".dbs: " + err[0]);
          names.push(name);
          perms.push(p);
        }
        this.users = names;
        this.userPerms = perms;
      } else {
        this.users = null;
      }
      if (c.ok && this.users === null && this.apps === null && this.dbs === null) c.fail("static provider needs at least one of users, apps, dbs");
    } else {
      c.keys(root, ["provider", "apps", "secret", "token_field", "leeway_s", "now_unix_s"], "");
      this.jwt = true;
      const secret = c.str(root, "secret", "", "");
      if (c.ok && secret.length == 0) c.fail("secret is required for provider hmac_jwt");
      else if (c.ok && secret.length < 16) c.fail("secret must be at least 16 characters");
      this.secret = utf8(secret);
      this.tokenField = c.str(root, "token_field", "$proxyToken", "");
      if (this.tokenField.length == 0 || this.tokenField.includes(".")) c.fail("token_field must be a top-level field name");
      this.leeway = c.num(root, "leeway_s", 0, "");
      if (!(this.leeway >= 0)) c.fail("leeway_s must be >= 0");
      this.anchorUnix = c.num(root, "now_unix_s", -1, "");
      this.anchorNs = nowNs();
      if (c.ok && !selfTest()) c.fail("SHA-256 self-test failed");
    }
    if (!c.ok) { log.error("auth: bad config: " + c.error); return false; }
    return true;
  }

  deny(ctx: Context, msg: string): Action { return ctx.reject(13, "Unauthorized", msg); }

  onRequest(ctx: Context): Action {
    if (this.apps !== null && !this.appAllowed(ctx.appName)) return this.deny(ctx, "auth: application \"" + ctx.appName + "\" is not allowed");
    if (this.jwt) {
      const cmd = BsonDoc.fromBytes(ctx.body());
      if (cmd === null) return this.deny(ctx, "auth: unreadable command document");
      return this.checkJwt(ctx, cmd);
    }
    return this.checkStatic(ctx);
  }

  appAllowed(app: string): bool {
    if (changetype<usize>(this.lastApp) == 0 || changetype<usize>(this.lastApp) != changetype<usize>(app)) {
      this.lastAppAllowed = this.apps!.includes(app);
      this.lastApp = app;
    }
    return this.lastAppAllowed;
  }

  /** K_NEUTRAL / K_READ / K_WRITE, or K_AGGREGATE (read or write depending on the pipeline). */
  opClass(op: string): i32 {
    if (changetype<usize>(this.lastOp) != 0 && changetype<usize>(this.lastOp) == changetype<usize>(op)) return this.lastOpKind;
    let k: i32;
    if (op == "aggregate") k = K_AGGREGATE;
    else {
      const c = classify(op, null);
      k = c == "neutral" ? K_NEUTRAL : c == "read" ? K_READ : K_WRITE;
    }
    this.lastOp = op;
    this.lastOpKind = k;
    return k;
  }

  /** perms.level(db), cached for the last (perms, db) pair. */
  levelFor(perms: Perms, db: string): i32 {
    if (changetype<usize>(this.lastDb) == 0 || changetype<usize>(this.lastDb) != changetype<usize>(db) || this.lastPerms !== perms) {
      this.lastLevel = perms.level(db);
      this.lastDb = db;
      this.lastPerms = perms;
    }
    return this.lastLevel;
  }

  /** The command document, copied from the host only by the paths that read it. */
  command(ctx: Context): BsonDoc | null { return BsonDoc.fromBytes(ctx.body()); }

  checkStatic(ctx: Context): Action {
    // null: the connection's user, read from the host only when a check or a message needs it
    let user: string | null = null;
    let cmd: BsonDoc | null = null;
    if (this.fromField) {
      user = "";
      cmd = this.command(ctx);
      if (cmd === null) return this.deny(ctx, "auth: unreadable command document");
      const f = cmd.get(this.userField);
      if (f !== null && f.type == BsonType.STRING) user = f.asString();
      if (f !== null) {
        const stripped = unset(cmd, this.userField);
        if (stripped === null) return this.deny(ctx, "auth: could not strip " + this.userField);
        ctx.replaceBody(stripped);
        cmd = BsonDoc.fromBytes(stripped);
      }
    }
    let perms = this.dbs;
    const users = this.users;
    if (users !== null) {
      if (user === null) user = ctx.user;
      if (user.length == 0) return this.deny(ctx, "auth: no user identity" + (this.fromField ? " (send the " + this.userField + " field)" : " (connection is not authenticated)"));
      const i = users.indexOf(user);
      if (i < 0) return this.deny(ctx, "auth: user \"" + user + "\" is not allowed");
      const up = this.userPerms[i];
      if (up !== null) perms = up;
      if (this.fromField) ctx.setUser(user);
    }
    if (perms === null) return Action.Continue;
    // Only an aggregate's class depends on the document ($out / $merge make it a write).
    if (cmd === null && this.opClass(ctx.op) == K_AGGREGATE) {
      cmd = this.command(ctx);
      if (cmd === null) return this.deny(ctx, "auth: unreadable command document");
    }
    return this.checkPerms(ctx, cmd, perms, user);
  }

  /** `user` null: the connection's user, read only for the denial message. */
  checkPerms(ctx: Context, cmd: BsonDoc | null, perms: Perms, user: string | null): Action {
    let k = this.opClass(ctx.op);
    if (k == K_AGGREGATE) k = cmd !== null && pipelineWrites(cmd) ? K_WRITE : K_READ;
    if (k == K_NEUTRAL) return Action.Continue;
    const lvl = this.levelFor(perms, ctx.db);
    const need = k == K_READ ? PERM_READ : PERM_RW;
    if (lvl >= need) return Action.Continue;
    const kind = k == K_READ ? "read" : "write";
    const who = user !== null ? user : ctx.user;
    const subject = who.length > 0 ? "user \"" + who + "\"" : "this client";
    return this.deny(ctx, "auth: " + subject + " is not authorized to " + kind + " on database \"" + ctx.db + "\" (" + ctx.op +
      " needs " + (need == PERM_RW ? "readWrite" : "read") + ", has " + (lvl == PERM_RW ? "readWrite" : lvl == PERM_READ ? "read" : "none") + ")");
  }

  /** Wall clock in Unix seconds: the config's `now_unix_s` anchor when set (tests, replays),
   *  else the host clock; -1 when neither exists (older hosts) — tokens with exp/nbf then fail closed. */
  wallSeconds(): f64 {
    if (this.anchorUnix >= 0) return this.anchorUnix + <f64>(nowNs() - this.anchorNs) / 1e9;
    const p = property(PROPERTY_WALL_CLOCK_MS);
    if (p.length > 0) return F64.parseFloat(p) / 1000;
    return -1;
  }

  checkJwt(ctx: Context, cmd: BsonDoc): Action {
    const field = this.tokenField;
    const t = cmd.get(field);
    if (t === null) return this.deny(ctx, "auth: authentication required: send an HS256 JWT in the " + field + " field of each command");
    if (t.type != BsonType.STRING) return this.deny(ctx, "auth: " + field + " must be a string");
    const token = t.asString();
    // strip the token before anything can forward it
    const stripped = unset(cmd, field);
    if (stripped === null) return this.deny(ctx, "auth: could not strip " + field);
    ctx.replaceBody(stripped);

    const d1 = token.indexOf(".");
    const d2 = d1 < 0 ? -1 : token.indexOf(".", d1 + 1);
    if (d1 <= 0 || d2 <= d1 + 1 || token.indexOf(".", d2 + 1) >= 0) return this.deny(ctx, "auth: malformed token");
    const hdrBytes = base64UrlDecode(token, 0, d1);
    const payBytes = base64UrlDecode(token, d1 + 1, d2);
    const sig = base64UrlDecode(token, d2 + 1, token.length);
    if (hdrBytes === null || payBytes === null || sig === null) return this.deny(ctx, "auth: malformed token (base64url)");
    const hdr = parseJson(String.UTF8.decode(hdrBytes.buffer));
    if (hdr === null || !hdr.isObj) return this.deny(ctx, "auth: malformed token header");
    const alg = hdr.get("alg");
    if (alg === null || !alg.isStr || alg.s != "HS256") return this.deny(ctx, "auth: token algorithm must be HS256");
    const mac = hmacSha256(this.secret, utf8(token.substring(0, d2)));
    if (!equalBytes(mac, sig)) return this.deny(ctx, "auth: invalid token signature");
    const claims = parseJson(String.UTF8.decode(payBytes.buffer));
    if (claims === null || !claims.isObj) return this.deny(ctx, "auth: malformed token claims");
    const exp = claims.get("exp");
    const nbf = claims.get("nbf");
    if ((exp !== null && !exp.isNum) || (nbf !== null && !nbf.isNum)) return this.deny(ctx, "auth: exp/nbf claims must be numbers");
    if (exp !== null || nbf !== null) {
      const now = this.wallSeconds();
      if (now < 0) return this.deny(ctx, "auth: cannot check token expiry: the host provides no wall clock");
      if (exp !== null && now >= exp.n + this.leeway) return this.deny(ctx, "auth: token expired");
      if (nbf !== null && now + this.leeway < nbf.n) return this.deny(ctx, "auth: token not valid yet");
    }
    const sub = claims.get("sub");
    if (sub === null || !sub.isStr || sub.s.length == 0) return this.deny(ctx, "auth: token has no sub claim");
    const dbs = claims.get("dbs");
    let perms = new Perms();
    if (dbs !== null) {
      if (!dbs.isObj) return this.deny(ctx, "auth: dbs claim must be an object");
      const err: string[] = [""];
      const p = parsePerms(dbs, err);
      if (p === null) return this.deny(ctx, "auth: dbs claim: " + err[0]);
      perms = p;
    }
    ctx.setUser(sub.s);
    return this.checkPerms(ctx, BsonDoc.fromBytes(stripped)!, perms, sub.s);
  }
}

registerStep(new Auth());
export * from "../../../sdk/assembly/exports";
