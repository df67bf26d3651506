// Read commands: find, getMore, killCursors, count, distinct.
import { Long } from 'bson';
import type { Handler } from '../context.ts';
import { fail } from '../errors.ts';
import { cursorIdOf } from '../cursors.ts';
import { projector, select } from '../query.ts';
import { deepCopy, keyOf, pathValues } from '../values.ts';
import { arrayArg, boolArg, collectionArg, docArg, nonNegArg, numArg, strArg } from './args.ts';

const find: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const filter = docArg(cmd, 'filter') ?? {};
  const sort = docArg(cmd, 'sort');
  const projection = docArg(cmd, 'projection');
  const skip = nonNegArg(cmd, 'skip') ?? 0;
  let limit = numArg(cmd, 'limit') ?? 0;
  let singleBatch = boolArg(cmd, 'singleBatch') ?? false;
  if (limit < 0) {
    // legacy negative limit: one batch of |limit|
    limit = -limit;
    singleBatch = true;
  }
  const batchSize = nonNegArg(cmd, 'batchSize');
  const coll = ctx.store.get(ctx.db, name);
  const map = projector(projection);
  const docs = select(coll, filter, { sort, skip, limit: Math.trunc(limit), collation: docArg(cmd, 'collation') });
  return ctx.cursors.first(`${ctx.db}.${name}`, docs, { batchSize, singleBatch, map });
};

const getMore: Handler = (cmd, ctx) => {
  const id = cursorIdOf(cmd.getMore);
  if (id === undefined) fail('TypeMismatch', "BSON field 'getMore.getMore' is the wrong type, expected type 'long'");
  const coll = strArg(cmd, 'collection', true)!;
  const batchSize = nonNegArg(cmd, 'batchSize') ?? 0;
  const ns = `${ctx.db}.${coll}`;
  const owner = ctx.cursors.peekNs(id);
  if (owner === undefined) fail('CursorNotFound', `cursor id ${id} not found`);
  if (owner !== ns && !owner.startsWith(`${ctx.db}.$cmd`))
    fail('Unauthorized', `Requested getMore on namespace '${ns}', but cursor belongs to a different namespace ${owner}`);
  const reply = ctx.cursors.more(id, batchSize);
  if (!reply) fail('CursorNotFound', `cursor id ${id} not found`);
  return reply;
};

const killCursors: Handler = (cmd, ctx) => {
  collectionArg(cmd);
  const ids = arrayArg(cmd, 'cursors', true)!;
  const cursorsKilled: Long[] = [];
  const cursorsNotFound: Long[] = [];
  for (const raw of ids) {
    const id = cursorIdOf(raw);
    if (id === undefined) fail('TypeMismatch', "BSON field 'killCursors.cursors' must contain cursor ids of type long");
    (ctx.cursors.kill(id) ? cursorsKilled : cursorsNotFound).push(Long.fromBigInt(id));
  }
  return { cursorsKilled, cursorsNotFound, cursorsAlive: [], cursorsUnknown: [], ok: 1 };
};

const count: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const query = docArg(cmd, 'query') ?? {};
  const skip = nonNegArg(cmd, 'skip') ?? 0;
  const limit = Math.abs(numArg(cmd, 'limit') ?? 0);
  const coll = ctx.store.get(ctx.db, name);
  if (coll && Object.keys(query).length === 0) {
    const total = Math.max(0, coll.docs.size - skip);
    return { n: limit > 0 ? Math.min(limit, total) : total, ok: 1 };
  }
  return { n: select(coll, query, { skip, limit, collation: docArg(cmd, 'collation') }).length, ok: 1 };
};

const distinct: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const key = strArg(cmd, 'key', true)!;
  const query = docArg(cmd, 'query') ?? {};
  const docs = select(ctx.store.get(ctx.db, name), query, { collation: docArg(cmd, 'collation') });
  const seen = new Map<string, unknown>();
  for (const d of docs)
    for (const v of pathValues(d, key)) {
      if (v === undefined) continue;
      for (const e of Array.isArray(v) ? v : [v]) {
        const k = keyOf(e);
        if (!seen.has(k)) seen.set(k, e);
      }
    }
  return { values: deepCopy([...seen.values()]), ok: 1 };
};

export const readCommands: Record<string, Handler> = { find, getMore, killCursors, count, distinct };
