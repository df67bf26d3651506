// A small strict JSON parser for step configs (RFC 8259): objects keep key order, numbers are
// f64, strings are AS strings (\uXXXX escapes become UTF-16 code units). Never traps on bad input:
// parseJson returns null and jsonError() says why and where.

export const enum JKind { Null = 0, Bool = 1, Num = 2, Str = 3, Arr = 4, Obj = 5 }

export class JValue {
  kind: JKind = JKind.Null;
  b: bool = false;
  n: f64 = 0;
  s: string = "";
  items: JValue[] = [];
  keys: string[] = [];

  get isNull(): bool { return this.kind == JKind.Null; }
  get isBool(): bool { return this.kind == JKind.Bool; }
  get isNum(): bool { return this.kind == JKind.Num; }
  get isStr(): bool { return this.kind == JKind.Str; }
  get isArr(): bool { return this.kind == JKind.Arr; }
  get isObj(): bool { return this.kind == JKind.Obj; }

  /** Member of an object (last one wins on duplicates), or null. */
  get(key: string): JValue | null {
    if (this.kind != JKind.Obj) return null;
    for (let i = this.keys.length - 1; i >= 0; i--) if (this.keys[i] == key) return this.items[i];
    return null;
  }
  has(key: string): bool { return this.get(key) !== null; }

  /** True when the number is an integer representable exactly. */
  get isInt(): bool { return this.kind == JKind.Num && Math.floor(this.n) == this.n && Math.abs(this.n) <= 9007199254740991; }

  kindName(): string {
    switch (this.kind) {
      case JKind.Null: return "null";
      case JKind.Bool: return "boolean";
      case JKind.Num: return "number";
      case JKind.Str: return "string";
      case JKind.Arr: return "array";
      default: return "object";
    }
  }

  /** Serialises back to compact JSON (used in log lines and error messages). */
  toString(): string {
    switch (this.kind) {
      case JKind.Null: return "null";
      case JKind.Bool: return this.b ? "true" : "false";
      case JKind.Num: return this.isInt ? (<i64>this.n).toString() : this.n.toString();
      case JKind.Str: return quote(this.s);
      case JKind.Arr: {
        let out = "[";
        for (let i = 0; i < this.items.length; i++) { if (i > 0) out += ","; out += this.items[i].toString(); }
        return out + "]";
      }
      default: {
        let out = "{";
        for (let i = 0; i < this.keys.length; i++) {
          if (i > 0) out += ",";
          out += quote(this.keys[i]) + ":" + this.items[i].toString();
        }
        return out + "}";
      }
    }
  }
}

/** JSON string literal of `s`. */
export function quote(s: string): string {
  // Fast path: nothing to escape (the usual case for names) — one concatenation, no per-char strings.
  let clean = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c == 0x22 || c == 0x5c) { clean = false; break; }
  }
  if (clean) return "\"" + s + "\"";
  let out = "\"";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) out += "\\\"";
    else if (c == 0x5c) out += "\\\\";
    else if (c == 0x0a) out += "\\n";
    else if (c == 0x0d) out += "\\r";
    else if (c == 0x09) out += "\\t";
    else if (c < 0x20) { out += "\\u00"; out += (c < 16 ? "0" : "") + c.toString(16); }
    else out += String.fromCharCode(c);
  }
  return out + "\"";
}

let lastError = "";
export function jsonError(): string { return lastError; }

const MAX_DEPTH = 64;

class Parser {
  src: string;
  pos: i32 = 0;
  err: string = "";
  constructor(src: string) { this.src = src; }

  fail(msg: string): JValue | null {
    if (this.err.length == 0) this.err = msg + " at offset " + this.pos.toString();
    return null;
  }

  ws(): void {
    const s = this.src;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) this.pos++;
      else break;
    }
  }

  value(depth: i32): JValue | null {
    if (depth > MAX_DEPTH) return this.fail("nesting too deep");
    this.ws();
    const s = this.src;
    if (this.pos >= s.length) return this.fail("unexpected end of input");
    const c = s.charCodeAt(this.pos);
    if (c == 0x7b) return this.object(depth);
    if (c == 0x5b) return this.array(depth);
    if (c == 0x22) {
      const str = this.string();
      if (str === null) return null;
      const v = new JValue(); v.kind = JKind.Str; v.s = str; return v;
    }
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    if (this.word("true")) { const v = new JValue(); v.kind = JKind.Bool; v.b = true; return v; }
    if (this.word("false")) { const v = new JValue(); v.kind = JKind.Bool; return v; }
    if (this.word("null")) return new JValue();
    return this.fail("unexpected character '" + String.fromCharCode(c) + "'");
  }

  word(w: string): bool {
    if (this.src.length - this.pos < w.length) return false;
    for (let i = 0; i < w.length; i++) if (this.src.charCodeAt(this.pos + i) != w.charCodeAt(i)) return false;
    this.pos += w.length;
    return true;
  }

  number(): JValue | null {
    const s = this.src;
    const start = this.pos;
    if (s.charCodeAt(this.pos) == 0x2d) this.pos++;
    const intStart = this.pos;
    while (this.pos < s.length && isDigit(s.charCodeAt(this.pos))) this.pos++;
    const intLen = this.pos - intStart;
    if (intLen == 0) return this.fail("bad number");
    if (intLen > 1 && s.charCodeAt(intStart) == 0x30) return this.fail("leading zero in number");
    if (this.pos < s.length && s.charCodeAt(this.pos) == 0x2e) {
      this.pos++;
      const f = this.pos;
      while (this.pos < s.length && isDigit(s.charCodeAt(this.pos))) this.pos++;
      if (this.pos == f) return this.fail("bad fraction");
    }
    if (this.pos < s.length && (s.charCodeAt(this.pos) == 0x65 || s.charCodeAt(this.pos) == 0x45)) {
      this.pos++;
      if (this.pos < s.length && (s.charCodeAt(this.pos) == 0x2b || s.charCodeAt(this.pos) == 0x2d)) this.pos++;
      const e = this.pos;
      while (this.pos < s.length && isDigit(s.charCodeAt(this.pos))) this.pos++;
      if (this.pos == e) return this.fail("bad exponent");
    }
    const v = new JValue();
    v.kind = JKind.Num;
    v.n = F64.parseFloat(s.substring(start, this.pos));
    return v;
  }

  string(): string | null {
    const s = this.src;
    this.pos++; // opening quote
    let out = "";
    let runStart = this.pos;
    while (true) {
      if (this.pos >= s.length) { this.fail("unterminated string"); return null; }
      const c = s.charCodeAt(this.pos);
      if (c == 0x22) {
        out += s.substring(runStart, this.pos);
        this.pos++;
        return out;
      }
      if (c < 0x20) { this.fail("control character in string"); return null; }
      if (c == 0x5c) {
        out += s.substring(runStart, this.pos);
        this.pos++;
        if (this.pos >= s.length) { this.fail("unterminated escape"); return null; }
        const e = s.charCodeAt(this.pos);
        this.pos++;
        if (e == 0x22) out += "\"";
        else if (e == 0x5c) out += "\\";
        else if (e == 0x2f) out += "/";
        else if (e == 0x62) out += "\b";
        else if (e == 0x66) out += "\f";
        else if (e == 0x6e) out += "\n";
        else if (e == 0x72) out += "\r";
        else if (e == 0x74) out += "\t";
        else if (e == 0x75) {
          if (this.pos + 4 > s.length) { this.fail("bad \\u escape"); return null; }
          let code = 0;
          for (let i = 0; i < 4; i++) {
            const h = hexVal(s.charCodeAt(this.pos + i));
            if (h < 0) { this.fail("bad \\u escape"); return null; }
            code = (code << 4) | h;
          }
          this.pos += 4;
          out += String.fromCharCode(code);
        } else { this.pos--; this.fail("bad escape"); return null; }
        runStart = this.pos;
      } else {
        this.pos++;
      }
    }
  }

  array(depth: i32): JValue | null {
    this.pos++;
    const v = new JValue();
    v.kind = JKind.Arr;
    this.ws();
    if (this.pos < this.src.length && this.src.charCodeAt(this.pos) == 0x5d) { this.pos++; return v; }
    while (true) {
      const item = this.value(depth + 1);
      if (item === null) return null;
      v.items.push(item);
      this.ws();
      if (this.pos >= this.src.length) return this.fail("unterminated array");
      const c = this.src.charCodeAt(this.pos);
      this.pos++;
      if (c == 0x5d) return v;
      if (c != 0x2c) { this.pos--; return this.fail("expected ',' or ']'"); }
    }
  }

  object(depth: i32): JValue | null {
    this.pos++;
    const v = new JValue();
    v.kind = JKind.Obj;
    this.ws();
    if (this.pos < this.src.length && this.src.charCodeAt(this.pos) == 0x7d) { this.pos++; return v; }
    while (true) {
      this.ws();
      if (this.pos >= this.src.length || this.src.charCodeAt(this.pos) != 0x22) return this.fail("expected a key string");
      const key = this.string();
      if (key === null) return null;
      this.ws();
      if (this.pos >= this.src.length || this.src.charCodeAt(this.pos) != 0x3a) return this.fail("expected ':'");
      this.pos++;
      const item = this.value(depth + 1);
      if (item === null) return null;
      v.keys.push(key);
      v.items.push(item);
      this.ws();
      if (this.pos >= this.src.length) return this.fail("unterminated object");
      const c = this.src.charCodeAt(this.pos);
      this.pos++;
      if (c == 0x7d) return v;
      if (c != 0x2c) { this.pos--; return this.fail("expected ',' or '}'"); }
    }
  }
}

function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }
function hexVal(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** Parses a complete JSON text; null on error (see jsonError()). */
export function parseJson(src: string): JValue | null {
  const p = new Parser(src);
  const v = p.value(0);
  if (v === null) { lastError = p.err; return null; }
  p.ws();
  if (p.pos != src.length) { lastError = "trailing characters at offset " + p.pos.toString(); return null; }
  lastError = "";
  return v;
}
