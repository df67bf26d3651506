// BSON value helpers: deep copies that keep bson classes, a normalised view for
// mingo comparisons, canonical keys for equality/uniqueness, and mongod-style
// value formatting for error messages.
import { Binary, BSONRegExp, ObjectId, type Document } from 'bson';

const bsonTypeOf = (v: unknown): string | undefined =>
  v !== null && typeof v === 'object' ? ((v as { _bsontype?: string })._bsontype as string | undefined) : undefined;

export function isPlainObject(v: unknown): v is Document {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Deep copy that preserves bson classes. Immutable bson values (Long, Decimal128,
 * Timestamp, Int32, Double, MinKey, ...) are shared; mutable ones are copied.
 */
export function deepCopy<T>(input: T): T {
  const v: unknown = input;
  if (v === null || typeof v !== 'object') return input;
  if (Array.isArray(v)) return v.map(deepCopy) as T;
  if (isPlainObject(v)) {
    const out: Document = {};
    for (const k of Object.keys(v)) out[k] = deepCopy((v as Document)[k]);
    return out as T;
  }
  if (v instanceof Date) return new Date(v.getTime()) as T;
  if (v instanceof RegExp) return new RegExp(v.source, v.flags) as T;
  const t = bsonTypeOf(v);
  if (t === 'ObjectId') return new ObjectId((v as unknown as ObjectId).id) as T;
  if (t === 'Binary') {
    const b = v as unknown as Binary;
    return new Binary(Uint8Array.prototype.slice.call(b.buffer, 0, b.position), b.sub_type) as T;
  }
  if (ArrayBuffer.isView(v)) return (v as unknown as Uint8Array).slice() as T;
  return input;
}

const REGEX_FLAGS = new Set(['i', 'm', 's', 'u']);

/**
 * Converts one value to the form mingo compares correctly, or returns the same
 * reference when nothing needs changing (copy-on-write).
 *  - Int32/Double -> number; Long -> number (exact when within 2^53);
 *  - Decimal128 -> number (comparison only; precision may be lost);
 *  - BSONRegExp -> RegExp (unsupported flags dropped).
 * Used for comparison only: stored documents keep their original types.
 */
export function toMingo(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const n = toMingo(v[i]);
      if (n !== v[i]) {
        out ??= v.slice();
        out[i] = n;
      }
    }
    return out ?? v;
  }
  if (isPlainObject(v)) {
    let out: Document | undefined;
    for (const k of Object.keys(v)) {
      const n = toMingo(v[k]);
      if (n !== v[k]) {
        out ??= { ...v };
        out[k] = n;
      }
    }
    return out ?? v;
  }
  switch (bsonTypeOf(v)) {
    case 'Int32':
    case 'Double':
      return (v as { value: number }).value;
    case 'Long':
      return (v as { toNumber(): number }).toNumber();
    case 'Decimal128':
      return Number((v as object).toString());
    case 'BSONRegExp': {
      const r = v as BSONRegExp;
      const flags = [...r.options].filter((f) => REGEX_FLAGS.has(f)).join('');
      return new RegExp(r.pattern, flags);
    }
  }
  return v;
}

const normCache = new WeakMap<object, Document>();

/** Normalised (mingo-comparable) view of a stored, never-mutated document; cached. */
export function mingoView(doc: Document): Document {
  let n = normCache.get(doc);
  if (!n) {
    n = toMingo(doc) as Document;
    normCache.set(doc, n);
  }
  return n;
}

/**
 * Canonical string for a value: equal (in mongod's sense, roughly) values give
 * equal keys. Numbers of all widths collapse to one numeric form.
 */
export function keyOf(v: unknown): string {
  if (v === undefined || v === null) return 'z';
  switch (typeof v) {
    case 'number':
      return `n${v}`;
    case 'bigint':
      return `n${v}`;
    case 'string':
      return `s${JSON.stringify(v)}`;
    case 'boolean':
      return v ? 'bt' : 'bf';
  }
  if (Array.isArray(v)) return `[${v.map(keyOf).join(',')}]`;
  if (isPlainObject(v)) return `{${Object.keys(v).map((k) => `${JSON.stringify(k)}:${keyOf(v[k])}`).join(',')}}`;
  if (v instanceof Date) return `d${v.getTime()}`;
  if (v instanceof RegExp) return `r/${v.source}/${v.flags}`;
  const t = bsonTypeOf(v);
  switch (t) {
    case 'ObjectId':
      return `o${(v as ObjectId).toHexString()}`;
    case 'Int32':
    case 'Double':
      return `n${(v as { value: number }).value}`;
    case 'Long': {
      const s = (v as object).toString();
      const n = Number(s);
      return Number.isSafeInteger(n) ? `n${n}` : `n${s}`;
    }
    case 'Decimal128':
      return `n${Number((v as object).toString())}`;
    case 'Binary': {
      const b = v as Binary;
      return `x${b.sub_type}:${Buffer.from(b.buffer.subarray(0, b.position)).toString('base64')}`;
    }
  }
  if (t) return `${t}:${JSON.stringify(v)}`;
  return `?${String(v)}`;
}

/** Formats a value the way mongod prints it in error messages (`{ name: "x" }`). */
export function formatValue(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return `[ ${v.map(formatValue).join(', ')} ]`;
  if (isPlainObject(v)) {
    const keys = Object.keys(v);
    return keys.length ? `{ ${keys.map((k) => `${k}: ${formatValue(v[k])}`).join(', ')} }` : '{}';
  }
  if (v instanceof Date) return `new Date(${v.getTime()})`;
  switch (bsonTypeOf(v)) {
    case 'ObjectId':
      return `ObjectId('${(v as ObjectId).toHexString()}')`;
    case 'Long':
    case 'Int32':
    case 'Double':
      return String((v as object).toString());
    case 'Decimal128':
      return `NumberDecimal("${(v as object).toString()}")`;
  }
  return String(v);
}

/** BSON type name for TypeMismatch messages. */
export function bsonTypeName(v: unknown): string {
  if (v === undefined) return 'missing';
  if (v === null) return 'null';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'double';
  if (typeof v === 'bigint') return 'long';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  const t = bsonTypeOf(v);
  if (t) return ({ ObjectId: 'objectId', Int32: 'int', Double: 'double', Long: 'long', Decimal128: 'decimal', Binary: 'binData',
    BSONRegExp: 'regex' } as Record<string, string>)[t] ?? t.toLowerCase();
  return 'object';
}

/** Resolves a dotted path; returns the list of values reached (arrays fan out). */
export function pathValues(doc: unknown, path: string): unknown[] {
  const parts = path.split('.');
  let cur: unknown[] = [doc];
  for (const p of parts) {
    const next: unknown[] = [];
    for (const c of cur) {
      if (Array.isArray(c)) {
        if (/^\d+$/.test(p)) next.push(c[Number(p)]);
        else for (const e of c) if (isPlainObject(e)) next.push(e[p]);
      } else if (isPlainObject(c)) next.push(c[p]);
      else next.push(undefined);
    }
    cur = next;
  }
  return cur;
}

/** Plain numeric value of a number-like (number, Int32, Long, Double, Decimal128). */
export function asNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  const n = toMingo(v);
  return typeof n === 'number' ? n : undefined;
}
