// Query execution on top of mingo. Filters and sorts run against the normalised
// (mingo-comparable) view of each stored document; results are the original
// stored documents, so BSON types survive untouched.
import type { Document } from 'bson';
import { find as mingoFind, Query } from 'mingo';
import { fail, toCommandError } from './errors.ts';
import type { Collection } from './store.ts';
import { deepCopy, isPlainObject, keyOf, mingoView, toMingo } from './values.ts';

export interface SelectOptions {
  sort?: Document;
  skip?: number;
  limit?: number; // 0 = no limit
  collation?: Document;
}

function mingoOptions(collation?: Document): Document {
  return collation && isPlainObject(collation) ? { collation } : {};
}

/** Compiles a filter into a mingo Query (on normalised values); maps mingo errors. */
export function compileFilter(filter: unknown, collation?: Document): Query {
  if (filter === undefined || filter === null) filter = {};
  if (!isPlainObject(filter)) fail('TypeMismatch', `filter must be an object, found ${typeof filter}`);
  try {
    return new Query(toMingo(filter) as Document, mingoOptions(collation));
  } catch (e) {
    throw toCommandError(e);
  }
}

/** `{_id: <scalar>}` filters are answered from the _id map directly. */
function idLookup(coll: Collection, filter: Document): Document[] | undefined {
  const keys = Object.keys(filter);
  if (keys.length !== 1 || keys[0] !== '_id') return undefined;
  const v = filter._id;
  if (v === null || v === undefined || Array.isArray(v) || isPlainObject(v) || v instanceof RegExp) return undefined;
  if ((v as { _bsontype?: string })._bsontype === 'BSONRegExp') return undefined;
  const d = coll.docs.get(keyOf(v));
  return d ? [d] : [];
}

function stripSortNatural(sort: Document | undefined): Document | undefined {
  if (!sort || !isPlainObject(sort)) return undefined;
  const s: Document = {};
  for (const [k, v] of Object.entries(sort)) if (k !== '$natural') s[k] = toMingo(v);
  return Object.keys(s).length ? s : undefined;
}

/** Returns matching stored documents (by reference; never mutate them). */
export function select(coll: Collection | undefined, filter: unknown, opts: SelectOptions = {}): Document[] {
  if (!coll) {
    compileFilter(filter, opts.collation);
    return [];
  }
  const f = (filter ?? {}) as Document;
  const sort = stripSortNatural(opts.sort);
  const skip = opts.skip ?? 0;
  const limit = opts.limit ?? 0;
  if (isPlainObject(f) && !sort) {
    const direct = idLookup(coll, f);
    if (direct) return direct.slice(skip, limit > 0 ? skip + limit : undefined);
  }
  const q = compileFilter(f, opts.collation);
  try {
    if (!sort) {
      // natural order: stream with early exit on limit
      const out: Document[] = [];
      let skipped = 0;
      for (const d of coll.docs.values()) {
        if (!q.test(mingoView(d))) continue;
        if (skipped < skip) {
          skipped++;
          continue;
        }
        out.push(d);
        if (limit > 0 && out.length >= limit) break;
      }
      return out;
    }
    const back = new Map<Document, Document>();
    const views: Document[] = [];
    for (const d of coll.docs.values()) {
      const v = mingoView(d);
      back.set(v, d);
      views.push(v);
    }
    let cur = mingoFind(views, toMingo(f) as Document, undefined, mingoOptions(opts.collation)).sort(sort);
    if (skip) cur = cur.skip(skip);
    if (limit > 0) cur = cur.limit(limit);
    return cur.all().map((v) => back.get(v as Document) as Document);
  } catch (e) {
    throw toCommandError(e);
  }
}

function stripUndefined(d: Document): Document {
  for (const k of Object.keys(d)) {
    if (d[k] === undefined) delete d[k];
    else if (isPlainObject(d[k])) stripUndefined(d[k]);
  }
  return d;
}

/**
 * Returns a function that copies a stored document and applies a projection
 * (via mingo). Throws a CommandError on an invalid projection.
 */
export function projector(projection: unknown): (d: Document) => Document {
  if (projection === undefined || projection === null || (isPlainObject(projection) && Object.keys(projection).length === 0))
    return (d) => deepCopy(d);
  if (!isPlainObject(projection)) fail('TypeMismatch', 'projection must be an object');
  const spec = toMingo(projection) as Document;
  const apply = (d: Document): Document => {
    try {
      return stripUndefined(mingoFind([deepCopy(d)], {}, spec).all()[0] as Document);
    } catch (e) {
      throw toCommandError(e);
    }
  };
  apply({}); // validate eagerly (e.g. mixed inclusion/exclusion)
  return apply;
}
