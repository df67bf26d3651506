// Index catalogue of one collection. Indexes are not used to speed up queries
// (every query is a scan through mingo); they exist so that listIndexes answers
// correctly and unique constraints (single-field, compound, multikey) hold.
import type { Document } from 'bson';
import { Query } from 'mingo';
import { CommandError, ErrorCodes, fail } from './errors.ts';
import { deepCopy, formatValue, isPlainObject, keyOf, mingoView, pathValues, toMingo } from './values.ts';

export interface IndexSpec extends Document {
  v: number;
  key: Document;
  name: string;
  unique?: boolean;
  sparse?: boolean;
  partialFilterExpression?: Document;
}

interface KeyEntry {
  str: string;
  value: Document; // keyValue as mongod reports it
}

/** Default index name as mongod builds it: `a_1_b_-1`. */
export function defaultIndexName(key: Document): string {
  return Object.entries(key)
    .map(([k, v]) => `${k}_${typeof v === 'object' ? String(v) : v}`)
    .join('_');
}

const ID_SPEC: IndexSpec = { v: 2, key: { _id: 1 }, name: '_id_' };

class Index {
  readonly spec: IndexSpec;
  private readonly fields: string[];
  private readonly partial: Query | undefined;
  /** unique indexes only: key string -> owning document _id key */
  readonly entries = new Map<string, string>();

  constructor(spec: IndexSpec) {
    this.spec = spec;
    this.fields = Object.keys(spec.key);
    this.partial = spec.partialFilterExpression
      ? new Query(toMingo(spec.partialFilterExpression) as Document)
      : undefined;
  }

  get unique(): boolean {
    return this.spec.unique === true;
  }

  keys(doc: Document): KeyEntry[] {
    if (this.partial && !this.partial.test(mingoView(doc))) return [];
    let tuples: unknown[][] = [[]];
    let anyPresent = false;
    for (const f of this.fields) {
      const vals: unknown[] = [];
      for (const v of pathValues(doc, f)) {
        if (v !== undefined) anyPresent = true;
        if (Array.isArray(v)) {
          if (v.length === 0) vals.push(undefined);
          else for (const e of v) vals.push(e);
        } else vals.push(v);
      }
      const uniq = new Map<string, unknown>();
      for (const v of vals.length ? vals : [undefined]) uniq.set(keyOf(v), v);
      const next: unknown[][] = [];
      for (const t of tuples) for (const v of uniq.values()) next.push([...t, v]);
      tuples = next;
    }
    if (this.spec.sparse && !anyPresent) return [];
    return tuples.map((t) => {
      const value: Document = {};
      this.fields.forEach((f, i) => (value[f] = t[i] === undefined ? null : t[i]));
      return { str: t.map(keyOf).join('|'), value };
    });
  }
}

export class IndexSet {
  private readonly list: Index[] = [];

  constructor(private readonly ns: string) {}

  specs(): IndexSpec[] {
    return [ID_SPEC, ...this.list.map((i) => i.spec)].map((s) => deepCopy(s));
  }

  get count(): number {
    return this.list.length + 1;
  }

  find(name: string): IndexSpec | undefined {
    if (name === '_id_') return ID_SPEC;
    return this.list.find((i) => i.spec.name === name)?.spec;
  }

  findByKey(key: Document): IndexSpec | undefined {
    if (keyOf(key) === keyOf(ID_SPEC.key)) return ID_SPEC;
    const k = keyOf(key);
    return this.list.find((i) => keyOf(i.spec.key) === k)?.spec;
  }

  dupKeyError(indexName: string, keyPattern: Document, keyValue: Document): CommandError {
    return new CommandError(
      ErrorCodes.DuplicateKey,
      `E11000 duplicate key error collection: ${this.ns} index: ${indexName} dup key: ${formatValue(keyValue)}`,
      { keyPattern: deepCopy(keyPattern), keyValue: deepCopy(keyValue) },
    );
  }

  /** Throws a DuplicateKey CommandError if `doc` collides with a document other than `selfId`. */
  check(doc: Document, selfId: string): void {
    for (const idx of this.list) {
      if (!idx.unique) continue;
      for (const k of idx.keys(doc)) {
        const owner = idx.entries.get(k.str);
        if (owner !== undefined && owner !== selfId) throw this.dupKeyError(idx.spec.name, idx.spec.key, k.value);
      }
    }
  }

  add(doc: Document, id: string): void {
    for (const idx of this.list) if (idx.unique) for (const k of idx.keys(doc)) idx.entries.set(k.str, id);
  }

  remove(doc: Document, id: string): void {
    for (const idx of this.list)
      if (idx.unique) for (const k of idx.keys(doc)) if (idx.entries.get(k.str) === id) idx.entries.delete(k.str);
  }

  clear(): void {
    for (const idx of this.list) idx.entries.clear();
  }

  /**
   * Creates an index over the existing documents. Returns false when an identical
   * index already exists. Throws on conflicts or duplicate keys.
   */
  create(raw: Document, docs: Iterable<[string, Document]>): boolean {
    if (!isPlainObject(raw)) fail('TypeMismatch', 'Each index specification must be an object');
    if (!isPlainObject(raw.key) || Object.keys(raw.key).length === 0)
      fail('FailedToParse', "The 'key' field must be a non-empty object");
    const name = raw.name === undefined ? defaultIndexName(raw.key) : raw.name;
    if (typeof name !== 'string' || !name) fail('TypeMismatch', "The 'name' field must be a non-empty string");
    const spec: IndexSpec = { ...deepCopy(raw), v: 2, key: deepCopy(raw.key), name };
    const uniqueOpt: unknown = spec.unique;
    if (spec.unique !== true) delete spec.unique;
    const sameName = this.find(name);
    const sameKey = this.findByKey(spec.key);
    const optsKey = (s: Document) => keyOf({ key: s.key, unique: !!s.unique, sparse: !!s.sparse, p: s.partialFilterExpression ?? null });
    if (name === '_id_' || keyOf(spec.key) === keyOf(ID_SPEC.key)) {
      if (uniqueOpt === false) fail('InvalidOptions', "The field 'unique' is not valid for an _id index specification.");
      return false;
    }
    if (sameName) {
      if (optsKey(sameName) === optsKey(spec)) return false;
      fail(
        'IndexKeySpecsConflict',
        `An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause ` +
          `conflicts. Please refer to our documentation. Requested index: ${formatValue(spec)}, existing index: ${formatValue(sameName)}`,
      );
    }
    if (sameKey && keyOf(sameKey.partialFilterExpression ?? null) === keyOf(spec.partialFilterExpression ?? null)) {
      if (optsKey(sameKey) === optsKey(spec))
        fail('IndexOptionsConflict', `Index already exists with a different name: ${sameKey.name}`);
      fail('IndexOptionsConflict', `An equivalent index already exists with the same name but different options. Requested ` +
        `index: ${formatValue(spec)}, existing index: ${formatValue(sameKey)}`);
    }
    const idx = new Index(spec);
    if (idx.unique) {
      for (const [id, doc] of docs)
        for (const k of idx.keys(doc)) {
          const owner = idx.entries.get(k.str);
          if (owner !== undefined && owner !== id) {
            const e = this.dupKeyError(name, spec.key, k.value);
            throw new CommandError(e.code, `Index build failed: ${e.message}`, e.extra);
          }
          idx.entries.set(k.str, id);
        }
    }
    this.list.push(idx);
    return true;
  }

  /** Drops by name; returns false if not found. `_id_` cannot be dropped. */
  drop(name: string): boolean {
    const i = this.list.findIndex((x) => x.spec.name === name);
    if (i < 0) return false;
    this.list.splice(i, 1);
    return true;
  }

  dropAll(): void {
    this.list.length = 0;
  }
}
