import { proxy_log, proxy_log_fields, proxy_get_number, Property, LogLevel, strPtr, strLen } from "./host";

/** Plugin logging; lines go to the proxy's logger tagged with the step and pipeline. */
export namespace log {
  /**
   * Whether the proxy writes lines of this level for this step (its `log.level`): a line below it
   * is dropped, so a step that builds a costly line checks first. One host call; true on a host
   * that does not say (before ABI property LogLevel).
   */
  export function enabled(level: LogLevel): bool {
    const min = proxy_get_number(Property.LogLevel);
    return isNaN(min) || <f64>level >= min;
  }

  export function trace(msg: string): void { proxy_log(LogLevel.Trace, strPtr(msg), strLen(msg)); }
  export function debug(msg: string): void { proxy_log(LogLevel.Debug, strPtr(msg), strLen(msg)); }
  export function info(msg: string): void { proxy_log(LogLevel.Info, strPtr(msg), strLen(msg)); }
  export function warn(msg: string): void { proxy_log(LogLevel.Warn, strPtr(msg), strLen(msg)); }
  export function error(msg: string): void { proxy_log(LogLevel.Error, strPtr(msg), strLen(msg)); }
}

const HEX = "0123456789abcdef";

/**
 * A structured log line built as UTF-8 JSON members in a reused buffer and handed to the host,
 * which writes it as fields of its own line ({"time","level","logger","step","pipeline", ...yours})
 * without decoding or re-encoding it. Keep one per plugin:
 *   rec.begin().str("op", ctx.op).int("duration_us", us).bool("cached", hit).emit(LogLevel.Info);
 * Values are escaped here; do not repeat "step" or "pipeline" (the host writes them).
 */
export class LogRecord {
  private buf: Uint8Array = new Uint8Array(512);
  private len: i32 = 0;

  begin(): LogRecord { this.len = 0; return this; }

  str(key: string, value: string): LogRecord {
    this.key(key);
    this.quoted(value);
    return this;
  }

  int(key: string, value: i64): LogRecord {
    this.key(key);
    this.digits(value);
    return this;
  }

  num(key: string, value: f64): LogRecord {
    this.key(key);
    if (!isFinite(value)) this.ascii("null");
    else if (Math.floor(value) == value && Math.abs(value) < 9007199254740992) this.digits(<i64>value);
    else this.ascii(value.toString());
    return this;
  }

  bool(key: string, value: bool): LogRecord {
    this.key(key);
    this.ascii(value ? "true" : "false");
    return this;
  }

  emit(level: LogLevel): void {
    if (this.len > 0) proxy_log_fields(level, this.buf.dataStart, this.len);
  }

  private ensure(n: i32): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length << 1;
    while (cap < this.len + n) cap <<= 1;
    const b = new Uint8Array(cap);
    memory.copy(b.dataStart, this.buf.dataStart, this.len);
    this.buf = b;
  }

  // @ts-ignore: decorator
  @inline private put(b: u32): void { store<u8>(this.buf.dataStart + <usize>this.len, <u8>b); this.len++; }

  private key(k: string): void {
    this.ensure(1);
    if (this.len > 0) this.put(0x2c);
    this.quoted(k);
    this.ensure(1);
    this.put(0x3a);
  }

  private ascii(s: string): void {
    const n = s.length;
    this.ensure(n);
    const p = changetype<usize>(s);
    for (let i = 0; i < n; i++) this.put(load<u16>(p + (<usize>i << 1)) & 0x7f);
  }

  private digits(v: i64): void {
    this.ensure(21);
    if (v < 0) {
      this.put(0x2d);
      if (v == I64.MIN_VALUE) { this.ascii("9223372036854775808"); return; }
      v = -v;
    }
    const start = this.len;
    do { this.put(<u32>(v % 10) + 0x30); v /= 10; } while (v != 0);
    // reverse the digits in place
    let a = this.buf.dataStart + <usize>start, b = this.buf.dataStart + <usize>this.len - 1;
    while (a < b) { const t = load<u8>(a); store<u8>(a, load<u8>(b)); store<u8>(b, t); a++; b--; }
  }

  /** JSON string: escapes quote, backslash and control characters; UTF-16 → UTF-8 (a lone
   *  surrogate becomes U+FFFD). Plain ASCII, the common case, is copied in a tight loop. */
  private quoted(s: string): void {
    const n = s.length;
    this.ensure(n * 6 + 2);
    const src = changetype<usize>(s);
    const base = this.buf.dataStart;
    let out = base + <usize>this.len;
    store<u8>(out++, 0x22);
    let i = 0;
    // 8 characters at a time (SIMD, when the build enables it): while all are printable ASCII
    // other than quote and backslash, narrow them to bytes in one store.
    if (ASC_FEATURE_SIMD) {
      const lowest = i16x8.splat(0x20);
      const highest = i16x8.splat(0x7f);
      const quote = i16x8.splat(0x22);
      const backslash = i16x8.splat(0x5c);
      for (; i + 8 <= n; i += 8) {
        const v = v128.load(src + (<usize>i << 1));
        const bad = v128.or(v128.or(i16x8.lt_u(v, lowest), i16x8.gt_u(v, highest)), v128.or(i16x8.eq(v, quote), i16x8.eq(v, backslash)));
        if (v128.any_true(bad)) break;
        store<i64>(out, i64x2.extract_lane(i8x16.narrow_i16x8_u(v, v), 0));
        out += 8;
      }
    }
    for (; i < n; i++) {
      const c = <u32>load<u16>(src + (<usize>i << 1));
      if (c < 0x20 || c >= 0x80 || c == 0x22 || c == 0x5c) break;
      store<u8>(out++, <u8>c);
    }
    this.len = <i32>(out - base);
    if (i < n) this.escapedTail(s, i);
    this.put(0x22);
  }

  private escapedTail(s: string, from: i32): void {
    const n = s.length;
    const p = changetype<usize>(s);
    for (let i = from; i < n; i++) {
      let c = <u32>load<u16>(p + (<usize>i << 1));
      if (c < 0x80) {
        if (c == 0x22 || c == 0x5c) { this.put(0x5c); this.put(c); }
        else if (c < 0x20) {
          this.put(0x5c); this.put(0x75); this.put(0x30); this.put(0x30);
          this.put(<u32>HEX.charCodeAt(c >> 4)); this.put(<u32>HEX.charCodeAt(c & 15));
        } else this.put(c);
      } else if (c < 0x800) {
        this.put(0xc0 | (c >> 6)); this.put(0x80 | (c & 63));
      } else {
        if (c >= 0xd800 && c <= 0xdfff) {
          const lo = i + 1 < n ? <u32>load<u16>(p + (<usize>(i + 1) << 1)) : 0;
          if (c <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff) {
            c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
            i++;
            this.put(0xf0 | (c >> 18)); this.put(0x80 | ((c >> 12) & 63)); this.put(0x80 | ((c >> 6) & 63)); this.put(0x80 | (c & 63));
            continue;
          }
          c = 0xfffd;
        }
        this.put(0xe0 | (c >> 12)); this.put(0x80 | ((c >> 6) & 63)); this.put(0x80 | (c & 63));
      }
    }
  }
}
