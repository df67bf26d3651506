// Update application: operator updates ($set, $inc, ... via mingo's updater),
// replacement documents, and pipeline-style updates (via mingo's aggregator),
// plus the seed document for upserts.
import { ObjectId, type Document } from 'bson';
import { Aggregator, update as mingoUpdate } from 'mingo';
import { fail, toCommandError } from './errors.ts';
import { deepCopy, formatValue, isPlainObject, keyOf, toMingo } from './values.ts';

export type UpdateSpec =
  | { kind: 'ops'; ops: Document }
  | { kind: 'replace'; doc: Document }
  | { kind: 'pipeline'; stages: Document[] };

const UPDATE_OPS = new Set([
  '$set', '$unset', '$inc', '$mul', '$rename', '$min', '$max', '$currentDate',
  '$push', '$addToSet', '$pop', '$pull', '$pullAll', '$bit', '$setOnInsert',
]);
const PIPELINE_UPDATE_STAGES = new Set(['$addFields', '$set', '$project', '$unset', '$replaceRoot', '$replaceWith']);
const NUMERIC_ARG_OPS = new Set(['$inc', '$mul', '$bit']);

export function parseUpdate(u: unknown): UpdateSpec {
  if (Array.isArray(u)) {
    for (const st of u) {
      if (!isPlainObject(st) || Object.keys(st).length !== 1) fail('FailedToParse', 'Each pipeline stage must be an object with exactly one field');
      const name = Object.keys(st)[0];
      if (!PIPELINE_UPDATE_STAGES.has(name)) fail('InvalidOptions', `${name} is not allowed to be used within an update`);
    }
    return { kind: 'pipeline', stages: u as Document[] };
  }
  if (!isPlainObject(u)) fail('FailedToParse', 'Update argument must be either an object or an array');
  const keys = Object.keys(u);
  if (keys.length === 0 || !keys[0].startsWith('$')) {
    for (const k of keys)
      if (k.startsWith('$')) fail('DollarPrefixedFieldName', `The dollar ($) prefixed field '${k}' in '${k}' is not valid for storage.`);
    return { kind: 'replace', doc: u };
  }
  const seen: string[] = [];
  for (const k of keys) {
    if (!UPDATE_OPS.has(k))
      fail('FailedToParse', `Unknown modifier: ${k}. Expected a valid update modifier or pipeline-style update specified as an array`);
    const arg = u[k];
    if (!isPlainObject(arg)) fail('FailedToParse', `Modifiers operate on fields but we found type ${typeof arg} instead. For example: {$mod: ` +
      `{<field>: ...}} not {$set: ${formatValue(arg)}}`);
    const paths = Object.keys(arg);
    if (k === '$rename') for (const p of paths) if (typeof arg[p] === 'string') paths.push(arg[p]);
    for (const p of paths) {
      const clash = seen.find((s) => s === p || s.startsWith(`${p}.`) || p.startsWith(`${s}.`));
      if (clash !== undefined) fail('ConflictingUpdateOperators', `Updating the path '${p}' would create a conflict at ` +
        `'${clash.length < p.length ? clash : p}'`);
      seen.push(p);
    }
  }
  return { kind: 'ops', ops: u };
}

function idChanged(before: Document, after: Document): void {
  if (keyOf(before._id) !== keyOf(after._id))
    fail('ImmutableField', `Performing an update on the path '_id' would modify the immutable field '_id'`);
}

/** `_id` first, as mongod stores it. */
function idFirst(d: Document): Document {
  if (Object.keys(d)[0] === '_id' || d._id === undefined) return d;
  const { _id, ...rest } = d;
  return { _id, ...rest };
}

/**
 * Applies an update to a copy of `old`; returns the new document and whether it
 * differs. `inserting` marks an upsert insert ($setOnInsert applies; _id may be set).
 */
export function applyUpdate(old: Document, spec: UpdateSpec, arrayFilters: Document[] | undefined, inserting: boolean): { doc: Document; changed: boolean } {
  try {
    if (spec.kind === 'replace') {
      const doc: Document = deepCopy(spec.doc);
      if (doc._id === undefined && old._id !== undefined) return { doc: { _id: old._id, ...doc }, changed: keyOf({ _id: old._id, ...doc }) !== keyOf(old) };
      if (!inserting && old._id !== undefined && keyOf(doc._id) !== keyOf(old._id))
        fail('ImmutableField', `After applying the update, the (immutable) field '_id' was found to have been altered to _id: ${formatValue(doc._id)}`);
      const out = idFirst(doc);
      return { doc: out, changed: keyOf(out) !== keyOf(old) };
    }
    if (spec.kind === 'pipeline') {
      const res = new Aggregator(toMingo(deepCopy(spec.stages)) as Document[]).run([deepCopy(old)]);
      const doc = idFirst((res[0] ?? {}) as Document);
      if (!inserting || old._id !== undefined) idChanged(old, doc);
      return { doc, changed: keyOf(doc) !== keyOf(old) };
    }
    const modifier: Document = {};
    for (const [op, arg] of Object.entries(spec.ops)) {
      if (op === '$setOnInsert') {
        if (inserting) modifier.$set = { ...(modifier.$set ?? {}), ...deepCopy(arg) };
        continue;
      }
      const a = NUMERIC_ARG_OPS.has(op) ? toMingo(arg) : deepCopy(arg);
      modifier[op] = op === '$set' && modifier.$set ? { ...modifier.$set, ...(a as Document) } : a;
    }
    const doc = deepCopy(old);
    if (Object.keys(modifier).length === 0) return { doc, changed: false };
    const paths = mingoUpdate(doc, modifier, arrayFilters ? (toMingo(arrayFilters) as Document[]) : undefined, undefined, { cloneMode: 'none' });
    if (!inserting || old._id !== undefined) idChanged(old, doc);
    return { doc: idFirst(doc), changed: paths.length > 0 };
  } catch (e) {
    throw toCommandError(e);
  }
}

/** Collects equality fields of an upsert query (top level and inside $and). */
function equalities(q: Document, out: Document): void {
  for (const [k, v] of Object.entries(q)) {
    if (k === '$and' && Array.isArray(v)) {
      for (const sub of v) if (isPlainObject(sub)) equalities(sub, out);
      continue;
    }
    if (k.startsWith('$')) continue;
    if (v instanceof RegExp || (v as { _bsontype?: string } | null)?._bsontype === 'BSONRegExp') continue;
    if (isPlainObject(v) && Object.keys(v).some((x) => x.startsWith('$'))) {
      if ('$eq' in v) out[k] = v.$eq;
      continue;
    }
    out[k] = v;
  }
}

/** Builds the document inserted by an upsert that matched nothing. */
export function upsertDocument(q: Document, spec: UpdateSpec, arrayFilters: Document[] | undefined): Document {
  let seed: Document = {};
  if (spec.kind !== 'replace') {
    const eq: Document = {};
    equalities(q, eq);
    if (eq._id !== undefined) seed._id = deepCopy(eq._id);
    delete eq._id;
    if (Object.keys(eq).length) {
      try {
        mingoUpdate(seed, { $set: deepCopy(eq) }, undefined, undefined, { cloneMode: 'none' });
      } catch (e) {
        throw toCommandError(e);
      }
    }
  } else {
    const eq: Document = {};
    equalities(q, eq);
    if (eq._id !== undefined) seed = { _id: deepCopy(eq._id) };
  }
  let { doc } = applyUpdate(seed, spec, arrayFilters, true);
  if (doc._id === undefined) doc = { _id: new ObjectId(), ...doc };
  return idFirst(doc);
}
