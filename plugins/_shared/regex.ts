// A small regular-expression engine for filter predicates. Subset (JavaScript syntax):
//   literals, escapes \. \\ \/ \n \r \t and any escaped punctuation, . (any char but \n),
//   classes [abc] [a-z] [^...] with \d \w \s inside, \d \D \w \W \s \S, \b \B,
//   anchors ^ $ (whole input; no multiline), groups ( ) and (?: ), alternation |,
//   quantifiers * + ? {n} {n,} {n,m} (m <= 1000) and their lazy forms (*? +? ?? {..}?),
//   flag "i" (ASCII case-insensitive). Not supported: backreferences, lookaround, named groups,
//   flags other than i, Unicode classes; these are refused at compile time (configure).
// Search semantics like RegExp.test: unanchored unless the pattern uses ^ / $.
// Engine: a compiled program run by a backtracking VM with a visited bitmap (state = pc ×
// position), so a match costs at most O(program × input) steps: no catastrophic backtracking.

const I_CHAR: u8 = 0;   // a: char code
const I_ANY: u8 = 1;    // any except \n
const I_CLASS: u8 = 2;  // a: class index
const I_SPLIT: u8 = 3;  // a: first choice, b: second choice
const I_JMP: u8 = 4;    // a: target
const I_BOL: u8 = 5;
const I_EOL: u8 = 6;
const I_WORDB: u8 = 7;  // a: 1 = \b, 0 = \B
const I_MATCH: u8 = 8;

class Inst {
  op: u8;
  a: i32;
  b: i32;
  constructor(op: u8, a: i32, b: i32) { this.op = op; this.a = a; this.b = b; }
}

class CharClass {
  lo: i32[] = [];
  hi: i32[] = [];
  negate: bool = false;
  add(lo: i32, hi: i32): void { this.lo.push(lo); this.hi.push(hi); }
  test(c: i32, icase: bool): bool {
    let m = this.raw(c);
    if (!m && icase) {
      if (c >= 0x41 && c <= 0x5a) m = this.raw(c + 32);
      else if (c >= 0x61 && c <= 0x7a) m = this.raw(c - 32);
    }
    return m != this.negate;
  }
  private raw(c: i32): bool {
    for (let i = 0; i < this.lo.length; i++) if (c >= this.lo[i] && c <= this.hi[i]) return true;
    return false;
  }
}

// AST
const N_CHAR: u8 = 0;
const N_ANY: u8 = 1;
const N_CLASS: u8 = 2;
const N_CAT: u8 = 3;
const N_ALT: u8 = 4;
const N_REP: u8 = 5;
const N_BOL: u8 = 6;
const N_EOL: u8 = 7;
const N_WORDB: u8 = 8;
const N_EMPTY: u8 = 9;

class Node {
  kind: u8;
  c: i32 = 0;
  kids: Node[] = [];
  min: i32 = 0;
  max: i32 = -1; // -1 = unbounded
  greedy: bool = true;
  constructor(kind: u8) { this.kind = kind; }
}

const MAX_REPEAT = 1000;
const MAX_PROGRAM = 20000;
/** Longest input test() evaluates (the visited bitmap is program × input bits). */
export const MAX_INPUT = 65536;
/** Cap on program × (input + 1) states (the bitmap is 2 MiB at most). */
const MAX_STATES: i64 = 1 << 24;

export class Regex {
  source: string;
  icase: bool;
  prog: Inst[] = [];
  classes: CharClass[] = [];
  /** Compile error ("" when the pattern compiled). */
  error: string = "";
  anchoredStart: bool = false;
  private visited: StaticArray<u32> = new StaticArray<u32>(0);
  private stackPc: i32[] = [];
  private stackSp: i32[] = [];

  constructor(pattern: string, flags: string) {
    this.source = pattern;
    this.icase = false;
    this.compile(pattern, flags);
  }

  private compile(pattern: string, flags: string): void {
    for (let i = 0; i < flags.length; i++) {
      const f = flags.charAt(i);
      if (f == "i") this.icase = true;
      else { this.error = "unsupported regex flag \"" + f + "\" (only i)"; return; }
    }
    const p = new RxParser(pattern, this);
    const ast = p.parseAlt(0);
    if (p.error.length == 0 && p.pos < pattern.length) p.fail("unmatched ')'");
    if (p.error.length > 0) { this.error = p.error; return; }
    this.anchoredStart = ast.kind == N_BOL || (ast.kind == N_CAT && ast.kids.length > 0 && ast.kids[0].kind == N_BOL);
    this.emit(ast);
    this.prog.push(new Inst(I_MATCH, 0, 0));
    if (this.prog.length > MAX_PROGRAM) this.error = "regex too large";
  }

  get ok(): bool { return this.error.length == 0; }

  private emit(n: Node): void {
    const prog = this.prog;
    if (prog.length > MAX_PROGRAM) return;
    switch (n.kind) {
      case N_CHAR: prog.push(new Inst(I_CHAR, this.icase ? lower(n.c) : n.c, 0)); break;
      case N_ANY: prog.push(new Inst(I_ANY, 0, 0)); break;
      case N_CLASS: prog.push(new Inst(I_CLASS, n.c, 0)); break;
      case N_BOL: prog.push(new Inst(I_BOL, 0, 0)); break;
      case N_EOL: prog.push(new Inst(I_EOL, 0, 0)); break;
      case N_WORDB: prog.push(new Inst(I_WORDB, n.c, 0)); break;
      case N_EMPTY: break;
      case N_CAT: for (let i = 0; i < n.kids.length; i++) this.emit(n.kids[i]); break;
      case N_ALT: {
        // SPLIT L1, next; L1: a; JMP end; next: SPLIT L2, next2; ... last: z; end:
        const jumps = new Array<i32>();
        for (let i = 0; i < n.kids.length; i++) {
          if (i < n.kids.length - 1) {
            const split = prog.length;
            prog.push(new Inst(I_SPLIT, split + 1, 0));
            this.emit(n.kids[i]);
            jumps.push(prog.length);
            prog.push(new Inst(I_JMP, 0, 0));
            prog[split].b = prog.length;
          } else {
            this.emit(n.kids[i]);
          }
        }
        for (let i = 0; i < jumps.length; i++) prog[jumps[i]].a = prog.length;
        break;
      }
      case N_REP: {
        const kid = n.kids[0];
        for (let i = 0; i < n.min; i++) this.emit(kid);
        if (n.max < 0) {
          // L: SPLIT body, end; body: kid; JMP L; end:
          const l = prog.length;
          prog.push(new Inst(I_SPLIT, 0, 0));
          this.emit(kid);
          prog.push(new Inst(I_JMP, l, 0));
          this.setSplit(l, l + 1, prog.length, n.greedy);
        } else {
          const splits = new Array<i32>();
          for (let i = n.min; i < n.max; i++) {
            splits.push(prog.length);
            prog.push(new Inst(I_SPLIT, 0, 0));
            this.emit(kid);
          }
          for (let i = 0; i < splits.length; i++) this.setSplit(splits[i], splits[i] + 1, prog.length, n.greedy);
        }
        break;
      }
    }
  }

  private setSplit(at: i32, body: i32, skip: i32, greedy: bool): void {
    const ins = this.prog[at];
    if (greedy) { ins.a = body; ins.b = skip; } else { ins.a = skip; ins.b = body; }
  }

  /** Set by test() when the input was longer than MAX_INPUT (the result is then false). */
  overflow: bool = false;

  /** True when the pattern matches somewhere in `s` (RegExp.prototype.test semantics). */
  test(s: string): bool {
    this.overflow = false;
    if (!this.ok) return false;
    const n = s.length;
    if (n > MAX_INPUT || <i64>this.prog.length * <i64>(n + 1) > MAX_STATES) { this.overflow = true; return false; }
    const plen = this.prog.length;
    const bits = <i64>plen * <i64>(n + 1);
    const words = <i32>((bits + 31) >> 5);
    if (this.visited.length < words) this.visited = new StaticArray<u32>(words);
    else memory.fill(changetype<usize>(this.visited), 0, <usize>words << 2);
    const last = this.anchoredStart ? 0 : n;
    for (let start = 0; start <= last; start++) {
      if (this.run(s, start)) return true;
    }
    return false;
  }

  private run(s: string, start: i32): bool {
    const n = s.length;
    const plen = this.prog.length;
    const visited = this.visited;
    const sp = this.stackSp;
    const st = this.stackPc;
    st.length = 0; sp.length = 0;
    st.push(0); sp.push(start);
    while (st.length > 0) {
      let pc = st.pop();
      let i = sp.pop();
      while (true) {
        const bit = i * plen + pc;
        const w = bit >>> 5;
        const m: u32 = 1 << (bit & 31);
        if ((unchecked(visited[w]) & m) != 0) break;
        unchecked(visited[w] = visited[w] | m);
        const ins = unchecked(this.prog[pc]);
        const op = ins.op;
        if (op == I_MATCH) return true;
        if (op == I_CHAR) {
          if (i >= n) break;
          let c = <i32>s.charCodeAt(i);
          if (this.icase) c = lower(c);
          if (c != ins.a) break;
          i++; pc++;
        } else if (op == I_ANY) {
          if (i >= n || s.charCodeAt(i) == 0x0a) break;
          i++; pc++;
        } else if (op == I_CLASS) {
          if (i >= n || !this.classes[ins.a].test(s.charCodeAt(i), this.icase)) break;
          i++; pc++;
        } else if (op == I_SPLIT) {
          st.push(ins.b); sp.push(i);
          pc = ins.a;
        } else if (op == I_JMP) {
          pc = ins.a;
        } else if (op == I_BOL) {
          if (i != 0) break;
          pc++;
        } else if (op == I_EOL) {
          if (i != n) break;
          pc++;
        } else { // I_WORDB
          const before = i > 0 && isWord(s.charCodeAt(i - 1));
          const after = i < n && isWord(s.charCodeAt(i));
          if ((before != after) != (ins.a == 1)) break;
          pc++;
        }
      }
    }
    return false;
  }
}

function lower(c: i32): i32 { return c >= 0x41 && c <= 0x5a ? c + 32 : c; }
function isWord(c: i32): bool {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x5f;
}
function isDigitC(c: i32): bool { return c >= 0x30 && c <= 0x39; }

class RxParser {
  src: string;
  pos: i32 = 0;
  error: string = "";
  rx: Regex;
  constructor(src: string, rx: Regex) { this.src = src; this.rx = rx; }

  fail(msg: string): Node {
    if (this.error.length == 0) this.error = msg + " at position " + this.pos.toString() + " in /" + this.src + "/";
    return new Node(N_EMPTY);
  }

  peek(): i32 { return this.pos < this.src.length ? <i32>this.src.charCodeAt(this.pos) : -1; }

  parseAlt(depth: i32): Node {
    if (depth > 50) return this.fail("groups nested too deep");
    const first = this.parseCat(depth);
    if (this.peek() != 0x7c) return first;
    const alt = new Node(N_ALT);
    alt.kids.push(first);
    while (this.peek() == 0x7c) {
      this.pos++;
      alt.kids.push(this.parseCat(depth));
    }
    return alt;
  }

  parseCat(depth: i32): Node {
    const cat = new Node(N_CAT);
    while (this.pos < this.src.length && this.error.length == 0) {
      const c = this.peek();
      if (c == 0x7c || c == 0x29) break;
      const atom = this.parseAtom(depth);
      cat.kids.push(this.parseQuant(atom));
    }
    return cat;
  }

  parseQuant(atom: Node): Node {
    const c = this.peek();
    let min = -1, max = -1;
    if (c == 0x2a) { min = 0; max = -1; this.pos++; }
    else if (c == 0x2b) { min = 1; max = -1; this.pos++; }
    else if (c == 0x3f) { min = 0; max = 1; this.pos++; }
    else if (c == 0x7b) {
      const save = this.pos;
      this.pos++;
      const a = this.readInt();
      if (a < 0) { this.pos = save; return atom; } // a literal '{' as in JS (non-unicode mode)
      let b = a;
      if (this.peek() == 0x2c) {
        this.pos++;
        b = this.peek() == 0x7d ? -1 : this.readInt();
        if (b == -2) { this.pos = save; return atom; }
      }
      if (this.peek() != 0x7d) { this.pos = save; return atom; }
      this.pos++;
      if (a > MAX_REPEAT || b > MAX_REPEAT) return this.fail("repeat count above " + MAX_REPEAT.toString());
      if (b >= 0 && b < a) return this.fail("numbers out of order in {} quantifier");
      min = a; max = b;
    } else {
      return atom;
    }
    if (atom.kind == N_BOL || atom.kind == N_EOL || atom.kind == N_WORDB) return this.fail("nothing to repeat");
    const rep = new Node(N_REP);
    rep.kids.push(atom);
    rep.min = min; rep.max = max;
    if (this.peek() == 0x3f) { rep.greedy = false; this.pos++; }
    const c2 = this.peek();
    if (c2 == 0x2a || c2 == 0x2b || c2 == 0x3f) return this.fail("nothing to repeat");
    return rep;
  }

  /** Decimal integer; -2 when absent. */
  readInt(): i32 {
    const start = this.pos;
    let v = 0;
    while (isDigitC(this.peek())) {
      v = v * 10 + (this.peek() - 0x30);
      if (v > 100000) v = 100000;
      this.pos++;
    }
    return this.pos == start ? -2 : v;
  }

  charNode(c: i32): Node { const n = new Node(N_CHAR); n.c = c; return n; }

  classNode(cc: CharClass): Node {
    const n = new Node(N_CLASS);
    n.c = this.rx.classes.length;
    this.rx.classes.push(cc);
    return n;
  }

  parseAtom(depth: i32): Node {
    const c = this.peek();
    this.pos++;
    if (c == 0x28) { // (
      if (this.peek() == 0x3f) {
        if (this.pos + 1 < this.src.length && this.src.charCodeAt(this.pos + 1) == 0x3a) this.pos += 2;
        else return this.fail("lookaround and named groups are not supported");
      }
      const inner = this.parseAlt(depth + 1);
      if (this.peek() != 0x29) return this.fail("missing ')'");
      this.pos++;
      return inner;
    }
    if (c == 0x5b) return this.parseClass();
    if (c == 0x2e) return new Node(N_ANY);
    if (c == 0x5e) return new Node(N_BOL);
    if (c == 0x24) return new Node(N_EOL);
    if (c == 0x2a || c == 0x2b || c == 0x3f) return this.fail("nothing to repeat");
    if (c == 0x5c) return this.parseEscape();
    return this.charNode(c);
  }

  /** After a backslash, outside a class. */
  parseEscape(): Node {
    if (this.pos >= this.src.length) return this.fail("trailing backslash");
    const e = this.peek();
    this.pos++;
    const cc = new CharClass();
    if (addShorthand(cc, e)) return this.classNode(cc);
    if (e == 0x62 || e == 0x42) { const n = new Node(N_WORDB); n.c = e == 0x62 ? 1 : 0; return n; }
    if (isDigitC(e)) return this.fail("backreferences are not supported");
    const lit = escapeLiteral(e);
    if (lit < 0) return this.fail("unsupported escape \\" + String.fromCharCode(e));
    return this.charNode(lit);
  }

  parseClass(): Node {
    const cc = new CharClass();
    if (this.peek() == 0x5e) { cc.negate = true; this.pos++; }
    let first = true;
    while (true) {
      if (this.pos >= this.src.length) return this.fail("missing ']'");
      let c = this.peek();
      if (c == 0x5d && !first) { this.pos++; break; }
      if (c == 0x5d && first) { this.pos++; break; } // [] matches nothing, [^] anything (as in JS)
      first = false;
      this.pos++;
      let lo = c;
      if (c == 0x5c) {
        if (this.pos >= this.src.length) return this.fail("trailing backslash");
        const e = this.peek();
        this.pos++;
        if (addShorthand(cc, e)) continue;
        lo = e == 0x62 ? 0x08 : escapeLiteral(e);
        if (lo < 0) return this.fail("unsupported escape \\" + String.fromCharCode(e) + " in class");
      }
      // range?
      if (this.peek() == 0x2d && this.pos + 1 < this.src.length && this.src.charCodeAt(this.pos + 1) != 0x5d) {
        this.pos++;
        let hi = this.peek();
        this.pos++;
        if (hi == 0x5c) {
          const e = this.peek();
          this.pos++;
          hi = escapeLiteral(e);
          if (hi < 0) return this.fail("bad range end in class");
        }
        if (hi < lo) return this.fail("range out of order in class");
        cc.add(lo, hi);
      } else {
        cc.add(lo, lo);
      }
    }
    return this.classNode(cc);
  }
}

/** \d \D \w \W \s \S into `cc` (negated forms only as a whole class). */
function addShorthand(cc: CharClass, e: i32): bool {
  if (e == 0x64) { cc.add(0x30, 0x39); return true; }
  if (e == 0x77) { cc.add(0x30, 0x39); cc.add(0x41, 0x5a); cc.add(0x5f, 0x5f); cc.add(0x61, 0x7a); return true; }
  if (e == 0x73) { cc.add(0x09, 0x0d); cc.add(0x20, 0x20); cc.add(0xa0, 0xa0); cc.add(0x2028, 0x2029); cc.add(0xfeff, 0xfeff); return true; }
  if (e == 0x44 || e == 0x57 || e == 0x53) {
    // complement ranges of the lower-case shorthand
    const pos = new CharClass();
    addShorthand(pos, e + 32);
    let next = 0;
    // ranges are added in ascending order above
    for (let i = 0; i < pos.lo.length; i++) {
      const lo = pos.lo[i];
      if (lo > next) cc.add(next, lo - 1);
      next = pos.hi[i] + 1;
    }
    cc.add(next, 0xffff);
    return true;
  }
  return false;
}

/** Literal value of an escaped character, -1 when unsupported (letters other than n r t f v 0). */
function escapeLiteral(e: i32): i32 {
  if (e == 0x6e) return 0x0a;
  if (e == 0x72) return 0x0d;
  if (e == 0x74) return 0x09;
  if (e == 0x66) return 0x0c;
  if (e == 0x76) return 0x0b;
  if (e == 0x30) return 0;
  if ((e >= 0x41 && e <= 0x5a) || (e >= 0x61 && e <= 0x7a) || (e >= 0x31 && e <= 0x39)) return -1;
  return e;
}
