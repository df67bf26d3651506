// Write commands: insert, update, delete, findAndModify.
import type { Document } from 'bson';
import type { Handler } from '../context.ts';
import { fail, toCommandError } from '../errors.ts';
import { projector, select } from '../query.ts';
import type { Collection } from '../store.ts';
import { applyUpdate, parseUpdate, upsertDocument } from '../update.ts';
import { boolArg, collectionArg, docArg, docArrayArg, numArg } from './args.ts';

function writeError(index: number, e: unknown): Document {
  const err = toCommandError(e);
  return { index, code: err.code, ...(err.extra ?? {}), errmsg: err.message };
}

/** Runs statements; stops at the first error when ordered. */
function runStatements<T>(stmts: T[], ordered: boolean, fn: (s: T, i: number) => void): Document[] {
  const errors: Document[] = [];
  for (let i = 0; i < stmts.length; i++) {
    try {
      fn(stmts[i], i);
    } catch (e) {
      errors.push(writeError(i, e));
      if (ordered) break;
    }
  }
  return errors;
}

function withErrors(reply: Document, errors: Document[]): Document {
  if (errors.length) reply.writeErrors = errors;
  reply.ok = 1;
  return reply;
}

const insert: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const docs = docArrayArg(cmd, 'documents', true)!;
  const ordered = boolArg(cmd, 'ordered') ?? true;
  const [coll] = ctx.store.ensure(ctx.db, name);
  let n = 0;
  const errors = runStatements(docs, ordered, (d) => {
    coll.insert(d);
    n++;
  });
  return withErrors({ n }, errors);
};

interface UpdateStmt {
  q: Document;
  u: unknown;
  upsert: boolean;
  multi: boolean;
  arrayFilters?: Document[];
  collation?: Document;
  sort?: Document;
}

function parseUpdateStmt(s: Document): UpdateStmt {
  const q = docArg(s, 'q', true)!;
  if (s.u === undefined) fail('FailedToParse', "BSON field 'update.updates.u' is missing but a required field");
  const arrayFilters = docArrayArg(s, 'arrayFilters');
  return {
    q,
    u: s.u,
    upsert: boolArg(s, 'upsert') ?? false,
    multi: boolArg(s, 'multi') ?? false,
    arrayFilters,
    collation: docArg(s, 'collation'),
    sort: docArg(s, 'sort'),
  };
}

/** Applies one update statement; returns counts and the upserted _id, if any. */
function updateOne(coll: Collection, st: UpdateStmt): { n: number; nModified: number; upserted?: unknown; last?: Document } {
  const spec = parseUpdate(st.u);
  if (st.multi && spec.kind === 'replace') fail('FailedToParse', 'multi update is not supported for replacement-style update');
  const matches = select(coll, st.q, { limit: st.multi ? 0 : 1, sort: st.sort, collation: st.collation });
  if (matches.length === 0) {
    if (!st.upsert) return { n: 0, nModified: 0 };
    const doc = upsertDocument(st.q, spec, st.arrayFilters);
    const stored = coll.insert(doc);
    return { n: 1, nModified: 0, upserted: stored._id, last: stored };
  }
  let nModified = 0;
  let last: Document | undefined;
  for (const old of matches) {
    const { doc, changed } = applyUpdate(old, spec, st.arrayFilters, false);
    if (changed) {
      coll.replace(old, doc);
      nModified++;
    }
    last = changed ? doc : old;
  }
  return { n: matches.length, nModified, last };
}

const update: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const stmts = docArrayArg(cmd, 'updates', true)!;
  const ordered = boolArg(cmd, 'ordered') ?? true;
  let n = 0;
  let nModified = 0;
  const upserted: Document[] = [];
  const errors = runStatements(stmts, ordered, (s, index) => {
    const st = parseUpdateStmt(s);
    const coll = st.upsert ? ctx.store.ensure(ctx.db, name)[0] : ctx.store.get(ctx.db, name);
    if (!coll) {
      select(undefined, st.q); // validates the filter
      parseUpdate(st.u);
      return;
    }
    const r = updateOne(coll, st);
    n += r.n;
    nModified += r.nModified;
    if (r.upserted !== undefined) upserted.push({ index, _id: r.upserted });
  });
  const reply: Document = { n, nModified };
  if (upserted.length) reply.upserted = upserted;
  return withErrors(reply, errors);
};

const del: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const stmts = docArrayArg(cmd, 'deletes', true)!;
  const ordered = boolArg(cmd, 'ordered') ?? true;
  const coll = ctx.store.get(ctx.db, name);
  let n = 0;
  const errors = runStatements(stmts, ordered, (s) => {
    const q = docArg(s, 'q', true)!;
    const limit = numArg(s, 'limit');
    if (limit === undefined) fail('FailedToParse', "BSON field 'delete.deletes.limit' is missing but a required field");
    if (limit !== 0 && limit !== 1) fail('FailedToParse', `The limit field in delete objects must be 0 or 1. Got ${limit}`);
    const matches = select(coll, q, { limit, collation: docArg(s, 'collation') });
    for (const d of matches) coll!.remove(d);
    n += matches.length;
  });
  return withErrors({ n }, errors);
};

const findAndModify: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const query = docArg(cmd, 'query') ?? {};
  const sort = docArg(cmd, 'sort');
  const remove = boolArg(cmd, 'remove') ?? false;
  const returnNew = boolArg(cmd, 'new') ?? false;
  const upsert = boolArg(cmd, 'upsert') ?? false;
  const fields = docArg(cmd, 'fields');
  const arrayFilters = docArrayArg(cmd, 'arrayFilters');
  const collation = docArg(cmd, 'collation');
  const hasUpdate = cmd.update !== undefined && cmd.update !== null;
  if (remove && hasUpdate) fail('FailedToParse', 'Cannot specify both an update and remove=true');
  if (!remove && !hasUpdate) fail('FailedToParse', 'Either an update or remove=true must be specified');
  if (remove && returnNew) fail('FailedToParse', "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document");
  if (remove && upsert) fail('FailedToParse', 'Cannot specify both upsert=true and remove=true');
  const project = projector(fields);
  if (remove) {
    const coll = ctx.store.get(ctx.db, name);
    const [d] = select(coll, query, { sort, limit: 1, collation });
    if (d) coll!.remove(d);
    return { lastErrorObject: { n: d ? 1 : 0 }, value: d ? project(d) : null, ok: 1 };
  }
  const spec = parseUpdate(cmd.update);
  const coll = upsert ? ctx.store.ensure(ctx.db, name)[0] : ctx.store.get(ctx.db, name);
  const [old] = select(coll, query, { sort, limit: 1, collation });
  if (!old) {
    if (!upsert || !coll) return { lastErrorObject: { n: 0, updatedExisting: false }, value: null, ok: 1 };
    const stored = coll.insert(upsertDocument(query, spec, arrayFilters));
    return {
      lastErrorObject: { n: 1, updatedExisting: false, upserted: stored._id },
      value: returnNew ? project(stored) : null,
      ok: 1,
    };
  }
  const { doc, changed } = applyUpdate(old, spec, arrayFilters, false);
  if (changed) coll!.replace(old, doc);
  return { lastErrorObject: { n: 1, updatedExisting: true }, value: project(returnNew ? doc : old), ok: 1 };
};

export const writeCommands: Record<string, Handler> = {
  insert,
  update,
  delete: del,
  findAndModify,
  findandmodify: findAndModify,
};
