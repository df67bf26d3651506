// aggregate: pipeline stages run by mingo. `$out` and `$merge` (final stage) are
// applied by the engine against the store. Documents enter the pipeline in
// their normalised form (values.toMingo), so Int32/Double/Long/Decimal128
// wrappers come out of aggregation as JS numbers; ObjectId, Date, Binary etc.
// are preserved.
import type { Document } from 'bson';
import { Aggregator } from 'mingo';
import type { Ctx, Handler } from '../context.ts';
import { fail, toCommandError } from '../errors.ts';
import { select } from '../query.ts';
import type { Collection } from '../store.ts';
import { deepCopy, isPlainObject, keyOf, mingoView, toMingo } from '../values.ts';
import { boolArg, checkCollectionName, docArg, nonNegArg } from './args.ts';

interface Target {
  db: string;
  coll: string;
}

function parseTarget(v: unknown, ctx: Ctx, stage: string): Target {
  if (typeof v === 'string') return { db: ctx.db, coll: v };
  if (isPlainObject(v) && typeof v.coll === 'string') return { db: typeof v.db === 'string' ? v.db : ctx.db, coll: v.coll };
  fail('FailedToParse', `${stage} target must be a collection name or {db, coll}`);
}

function runPipeline(ctx: Ctx, input: Document[], stages: Document[], collation?: Document): Document[] {
  try {
    const agg = new Aggregator(toMingo(stages) as Document[], {
      ...(collation ? { collation: collation as never } : {}),
      collectionResolver: (name: string) =>
        (ctx.store.get(ctx.db, name)?.all() ?? []).map((d) => deepCopy(mingoView(d))),
    });
    return agg.run(input) as Document[];
  } catch (e) {
    throw toCommandError(e);
  }
}

function writeOut(ctx: Ctx, t: Target, docs: Document[]): void {
  checkCollectionName(t.coll, t.db);
  const [coll] = ctx.store.ensure(t.db, t.coll);
  const backup = coll.all();
  coll.clear();
  try {
    for (const d of docs) coll.insert(d);
  } catch (e) {
    coll.clear();
    for (const d of backup) coll.insert(d);
    throw e;
  }
}

function writeMerge(ctx: Ctx, spec: unknown, docs: Document[]): void {
  const s: Document = typeof spec === 'string' || (isPlainObject(spec) && spec.into === undefined) ? { into: spec } : (spec as Document);
  if (!isPlainObject(s)) fail('FailedToParse', '$merge requires a string or object argument');
  const t = parseTarget(s.into, ctx, '$merge');
  checkCollectionName(t.coll, t.db);
  const on: string[] = s.on === undefined ? ['_id'] : Array.isArray(s.on) ? (s.on as string[]) : [s.on as string];
  const whenMatched = s.whenMatched ?? 'merge';
  const whenNotMatched = s.whenNotMatched ?? 'insert';
  if (typeof whenMatched !== 'string' || !['merge', 'replace', 'keepExisting', 'fail'].includes(whenMatched))
    fail('CommandNotSupported', `devdb supports $merge whenMatched 'merge', 'replace', 'keepExisting' or 'fail' only`);
  if (!['insert', 'discard', 'fail'].includes(whenNotMatched)) fail('BadValue', `Enumeration value '${whenNotMatched}' for field 'whenNotMatched' ` +
    `is not a valid value.`);
  const [coll] = ctx.store.ensure(t.db, t.coll);
  for (const d of docs) {
    const q: Document = {};
    for (const f of on) {
      if (d[f] === undefined && f !== '_id') fail('BadValue', `$merge write error: 'on' field '${f}' cannot be missing, null or an array`);
      if (d[f] !== undefined) q[f] = d[f];
    }
    const [existing] = Object.keys(q).length === on.length ? select(coll, q, { limit: 1 }) : [];
    if (!existing) {
      if (whenNotMatched === 'discard') continue;
      if (whenNotMatched === 'fail') fail('MergeStageNoMatchingDocument', '$merge could not find a matching document in the target collection for ' +
        'at least one document in the source collection');
      coll.insert(d);
      continue;
    }
    if (whenMatched === 'keepExisting') continue;
    if (whenMatched === 'fail') throw coll.indexes.dupKeyError('_id_', { _id: 1 }, { _id: existing._id });
    const { _id, ...rest } = deepCopy(d);
    const next = whenMatched === 'merge' ? { ...deepCopy(existing), ...rest } : { _id: existing._id, ...rest };
    if (keyOf(next) !== keyOf(existing)) coll.replace(existing, next);
    void _id;
  }
}

const aggregate: Handler = (cmd, ctx) => {
  const target = cmd.aggregate;
  const dbLevel = target === 1 || (typeof target === 'number' && target === 1);
  if (!dbLevel && typeof target !== 'string')
    fail('FailedToParse', `Invalid {aggregate: ${String(target)}}; the 'aggregate' field must be a collection name or 1`);
  if (!dbLevel) checkCollectionName(target as string, ctx.db);
  if (!Array.isArray(cmd.pipeline)) fail(cmd.pipeline === undefined ? 'FailedToParse' : 'TypeMismatch', "'pipeline' option must be specified as an array");
  if (boolArg(cmd, 'explain')) fail('CommandNotSupported', 'explain is not supported by devdb (development upstream)');
  const cursor = docArg(cmd, 'cursor');
  if (!cursor) fail('FailedToParse', "The 'cursor' option is required, except for aggregate with the explain argument");
  const batchSize = nonNegArg(cursor, 'batchSize');
  const collation = docArg(cmd, 'collation');
  let stages = cmd.pipeline as Document[];
  stages.forEach((st, i) => {
    if (!isPlainObject(st) || Object.keys(st).length !== 1)
      fail('TypeMismatch', `Each element of the 'pipeline' array must be an object`);
    const name = Object.keys(st)[0];
    if ((name === '$out' || name === '$merge') && i !== stages.length - 1)
      fail('FailedToParse', `${name} can only be the final stage in the pipeline`);
    if (['$changeStream', '$currentOp', '$listSessions', '$listLocalSessions', '$collStats', '$indexStats', '$search', '$geoNear'].includes(name))
      fail('CommandNotSupported', `${name} is not supported by devdb (development upstream)`);
  });
  const last = stages.length ? stages[stages.length - 1] : undefined;
  const lastName = last ? Object.keys(last)[0] : undefined;
  const writer = lastName === '$out' || lastName === '$merge' ? last : undefined;
  if (writer) stages = stages.slice(0, -1);

  // input: a leading $match is answered by the query layer so only matches are copied
  let input: Document[] = [];
  if (!dbLevel) {
    const coll: Collection | undefined = ctx.store.get(ctx.db, target as string);
    let src = coll?.all() ?? [];
    if (stages.length && isPlainObject(stages[0].$match)) {
      src = select(coll, stages[0].$match, { collation });
      stages = stages.slice(1);
    }
    input = src.map((d) => deepCopy(mingoView(d)));
  }
  const out = runPipeline(ctx, input, stages, collation);

  if (writer && lastName === '$out') writeOut(ctx, parseTarget(writer.$out, ctx, '$out'), out);
  if (writer && lastName === '$merge') writeMerge(ctx, writer.$merge, out);
  const ns = dbLevel ? `${ctx.db}.$cmd.aggregate` : `${ctx.db}.${target as string}`;
  return ctx.cursors.first(ns, writer ? [] : out, { batchSize });
};

export const aggregateCommands: Record<string, Handler> = { aggregate };
