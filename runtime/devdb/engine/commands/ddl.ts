// Catalogue commands: databases, collections and indexes, plus stats.
import { calculateObjectSize, type Document } from 'bson';
import { Query } from 'mingo';
import type { Ctx, Handler } from '../context.ts';
import { fail, toCommandError } from '../errors.ts';
import type { Collection } from '../store.ts';
import { deepCopy, isPlainObject, keyOf, toMingo } from '../values.ts';
import { arrayArg, boolArg, checkCollectionName, checkDbName, collectionArg, docArg, nonNegArg } from './args.ts';

function filterWith(items: Document[], filter: Document | undefined): Document[] {
  if (!filter || Object.keys(filter).length === 0) return items;
  try {
    const q = new Query(toMingo(filter) as Document);
    return items.filter((i) => q.test(i));
  } catch (e) {
    throw toCommandError(e);
  }
}

function dataSize(c: Collection): number {
  let size = 0;
  for (const d of c.docs.values()) size += calculateObjectSize(d);
  return size;
}

function requireAdmin(ctx: Ctx, what: string): void {
  if (ctx.db !== 'admin') fail('Unauthorized', `${what} may only be run against the admin database.`);
}

const create: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  checkDbName(ctx.db);
  if (cmd.viewOn !== undefined) fail('CommandNotSupported', 'views are not supported by devdb (development upstream)');
  if (ctx.store.get(ctx.db, name)) fail('NamespaceExists', `Collection ${ctx.db}.${name} already exists.`);
  const options: Document = {};
  for (const [k, v] of Object.entries(cmd))
    if (!k.startsWith('$') && !['create', 'lsid', 'txnNumber', 'autocommit', 'startTransaction', 'writeConcern', 'readConcern', 'apiVersion',
      'apiStrict', 'apiDeprecationErrors', 'comment'].includes(k))
      options[k] = deepCopy(v);
  ctx.store.ensure(ctx.db, name, options);
  return { ok: 1 };
};

const drop: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const c = ctx.store.drop(ctx.db, name);
  if (!c) return { ok: 1 }; // mongod 7: dropping a missing collection succeeds
  return { nIndexesWas: c.indexes.count, ns: c.ns, ok: 1 };
};

const dropDatabase: Handler = (_cmd, ctx) => {
  ctx.store.dropDatabase(ctx.db);
  return { ok: 1 };
};

function splitNs(v: unknown, field: string): [string, string] {
  if (typeof v !== 'string') fail('TypeMismatch', `BSON field 'renameCollection.${field}' is the wrong type, expected type 'string'`);
  const i = v.indexOf('.');
  if (i <= 0 || i === v.length - 1) fail('InvalidNamespace', `Invalid namespace specified '${v}'`);
  return [v.slice(0, i), v.slice(i + 1)];
}

const renameCollection: Handler = (cmd, ctx) => {
  requireAdmin(ctx, 'renameCollection');
  const [sdb, scoll] = splitNs(cmd.renameCollection, 'renameCollection');
  const [tdb, tcoll] = splitNs(cmd.to, 'to');
  checkCollectionName(tcoll, tdb);
  const dropTarget = boolArg(cmd, 'dropTarget') ?? false;
  const src = ctx.store.get(sdb, scoll);
  if (!src) fail('NamespaceNotFound', `Source collection ${sdb}.${scoll} does not exist`);
  if (sdb === tdb && scoll === tcoll) fail('IllegalOperation', "Can't rename a collection to itself");
  if (ctx.store.get(tdb, tcoll)) {
    if (!dropTarget) fail('NamespaceExists', 'target namespace exists');
    ctx.store.drop(tdb, tcoll);
  }
  ctx.store.drop(sdb, scoll);
  ctx.store.attach(src, tdb, tcoll);
  return { ok: 1 };
};

const listDatabases: Handler = (cmd, ctx) => {
  requireAdmin(ctx, 'listDatabases');
  const nameOnly = boolArg(cmd, 'nameOnly') ?? false;
  let dbs: Document[] = ctx.store.databases().map((name): Document => {
    if (nameOnly) return { name };
    const size = ctx.store.collections(name).reduce((s, c) => s + dataSize(c), 0);
    return { name, sizeOnDisk: size, empty: size === 0 };
  });
  dbs = filterWith(dbs, docArg(cmd, 'filter'));
  if (nameOnly) return { databases: dbs, ok: 1 };
  const totalSize = dbs.reduce((s, d) => s + (d.sizeOnDisk as number), 0);
  return { databases: dbs, totalSize, totalSizeMb: Math.floor(totalSize / (1024 * 1024)), ok: 1 };
};

const listCollections: Handler = (cmd, ctx) => {
  const nameOnly = boolArg(cmd, 'nameOnly') ?? false;
  const cursor = docArg(cmd, 'cursor') ?? {};
  let items: Document[] = ctx.store.collections(ctx.db).map((c) =>
    nameOnly
      ? { name: c.name, type: 'collection' }
      : {
        name: c.name,
        type: 'collection',
        options: deepCopy(c.options),
        info: { readOnly: false, uuid: c.uuid },
        idIndex: { v: 2, key: { _id: 1 }, name: '_id_' },
      },
  );
  items = filterWith(items, docArg(cmd, 'filter'));
  return ctx.cursors.first(`${ctx.db}.$cmd.listCollections`, items, { batchSize: nonNegArg(cursor, 'batchSize') });
};

const createIndexes: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const specs = arrayArg(cmd, 'indexes', true)!;
  if (specs.length === 0) fail('BadValue', 'Must specify at least one index to create');
  const [coll, created] = ctx.store.ensure(ctx.db, name);
  const before = coll.indexes.count;
  let added = 0;
  for (const s of specs) {
    if (!isPlainObject(s)) fail('TypeMismatch', 'Each index specification must be an object');
    if (coll.indexes.create(s, coll.docs.entries())) added++;
  }
  const reply: Document = { numIndexesBefore: before, numIndexesAfter: coll.indexes.count, createdCollectionAutomatically: created };
  if (added === 0) reply.note = 'all indexes already exist';
  reply.ok = 1;
  return reply;
};

const listIndexes: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const coll = ctx.store.get(ctx.db, name);
  if (!coll) fail('NamespaceNotFound', `ns does not exist: ${ctx.db}.${name}`);
  const cursor = docArg(cmd, 'cursor') ?? {};
  return ctx.cursors.first(`${ctx.db}.${name}`, coll.indexes.specs(), { batchSize: nonNegArg(cursor, 'batchSize') });
};

const dropIndexes: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const coll = ctx.store.get(ctx.db, name);
  if (!coll) fail('NamespaceNotFound', `ns not found ${ctx.db}.${name}`);
  const was = coll.indexes.count;
  const idx = cmd.index;
  const dropOne = (n: string) => {
    if (n === '_id_') fail('InvalidOptions', 'cannot drop _id index');
    if (!coll.indexes.drop(n)) fail('IndexNotFound', `index not found with name [${n}]`);
  };
  if (idx === '*') coll.indexes.dropAll();
  else if (typeof idx === 'string') dropOne(idx);
  else if (Array.isArray(idx)) {
    for (const n of idx) if (typeof n !== 'string') fail('TypeMismatch', 'index names must be strings');
    for (const n of idx as string[]) if (n !== '_id_' && !coll.indexes.find(n)) fail('IndexNotFound', `index not found with name [${n}]`);
    (idx as string[]).forEach(dropOne);
  } else if (isPlainObject(idx)) {
    const spec = coll.indexes.findByKey(idx);
    if (!spec) fail('IndexNotFound', `can't find index with key: ${keyOf(idx)}`);
    dropOne(spec.name);
  } else fail(idx === undefined ? 'FailedToParse' : 'TypeMismatch', "BSON field 'dropIndexes.index' must be a string, an array of strings or an " +
    'index key pattern');
  return { nIndexesWas: was, ok: 1 };
};

const collStats: Handler = (cmd, ctx) => {
  const name = collectionArg(cmd);
  const coll = ctx.store.get(ctx.db, name);
  if (!coll) fail('NamespaceNotFound', `Collection [${ctx.db}.${name}] not found.`);
  const size = dataSize(coll);
  const count = coll.docs.size;
  const indexSizes: Document = {};
  for (const s of coll.indexes.specs()) indexSizes[s.name] = 0;
  return {
    ns: coll.ns,
    size,
    count,
    avgObjSize: count ? Math.floor(size / count) : 0,
    storageSize: size,
    freeStorageSize: 0,
    capped: false,
    nindexes: coll.indexes.count,
    totalIndexSize: 0,
    totalSize: size,
    indexSizes,
    ok: 1,
  };
};

const dbStats: Handler = (cmd, ctx) => {
  const colls = ctx.store.collections(ctx.db);
  const objects = colls.reduce((n, c) => n + c.docs.size, 0);
  const size = colls.reduce((n, c) => n + dataSize(c), 0);
  return {
    db: ctx.db,
    collections: colls.length,
    views: 0,
    objects,
    avgObjSize: objects ? size / objects : 0,
    dataSize: size,
    storageSize: size,
    indexes: colls.reduce((n, c) => n + c.indexes.count, 0),
    indexSize: 0,
    totalSize: size,
    scaleFactor: 1,
    fsUsedSize: 0,
    fsTotalSize: 0,
    ok: 1,
  };
};

export const ddlCommands: Record<string, Handler> = {
  create,
  drop,
  dropDatabase,
  renameCollection,
  listDatabases,
  listCollections,
  createIndexes,
  listIndexes,
  dropIndexes,
  deleteIndexes: dropIndexes,
  collStats,
  dbStats,
};
