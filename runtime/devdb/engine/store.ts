// In-memory catalogue: databases -> collections -> documents.
// Stored documents are private deep copies and are never mutated in place: an
// update replaces the document object. That lets cursors hold references and
// copy lazily at batch time, and lets values.mingoView cache by identity.
import { ObjectId, UUID, type Document } from 'bson';
import { CommandError, ErrorCodes, fail } from './errors.ts';
import { IndexSet } from './indexes.ts';
import { deepCopy, keyOf } from './values.ts';

export class Collection {
  readonly docs = new Map<string, Document>(); // keyOf(_id) -> document, natural (insertion) order
  readonly uuid = new UUID();
  indexes: IndexSet;
  options: Document;

  constructor(
    public db: string,
    public name: string,
    options: Document = {},
  ) {
    this.options = options;
    this.indexes = new IndexSet(this.ns);
  }

  get ns(): string {
    return `${this.db}.${this.name}`;
  }

  /** Re-homes the collection (renameCollection) keeping documents and indexes. */
  rename(db: string, name: string): void {
    const old = this.indexes;
    this.db = db;
    this.name = name;
    const fresh = new IndexSet(this.ns);
    for (const spec of old.specs()) if (spec.name !== '_id_') fresh.create(spec, this.docs.entries());
    this.indexes = fresh;
  }

  private dupId(id: unknown): CommandError {
    return this.indexes.dupKeyError('_id_', { _id: 1 }, { _id: id });
  }

  /** Inserts a document (copied). Adds an ObjectId `_id` first when missing. Returns the stored doc. */
  insert(input: Document): Document {
    let doc = deepCopy(input);
    if (doc._id === undefined) doc = { _id: new ObjectId(), ...doc };
    if (Array.isArray(doc._id)) fail('BadValue', `can't use an array for _id`);
    const id = keyOf(doc._id);
    if (this.docs.has(id)) throw this.dupId(doc._id);
    this.indexes.check(doc, id);
    this.docs.set(id, doc);
    this.indexes.add(doc, id);
    return doc;
  }

  /** Replaces `oldDoc` by `newDoc` (same _id; already private to the store). */
  replace(oldDoc: Document, newDoc: Document): void {
    const id = keyOf(oldDoc._id);
    if (keyOf(newDoc._id) !== id)
      fail('ImmutableField', `Performing an update on the path '_id' would modify the immutable field '_id'`);
    this.indexes.remove(oldDoc, id);
    try {
      this.indexes.check(newDoc, id);
    } catch (e) {
      this.indexes.add(oldDoc, id);
      throw e;
    }
    this.docs.set(id, newDoc);
    this.indexes.add(newDoc, id);
  }

  remove(doc: Document): void {
    const id = keyOf(doc._id);
    if (this.docs.get(id) !== doc) return;
    this.docs.delete(id);
    this.indexes.remove(doc, id);
  }

  clear(): void {
    this.docs.clear();
    this.indexes.clear();
  }

  all(): Document[] {
    return [...this.docs.values()];
  }
}

export class Store {
  private readonly dbs = new Map<string, Map<string, Collection>>();

  reset(): void {
    this.dbs.clear();
  }

  get(db: string, coll: string): Collection | undefined {
    return this.dbs.get(db)?.get(coll);
  }

  /** Returns [collection, createdNow]. */
  ensure(db: string, coll: string, options?: Document): [Collection, boolean] {
    let colls = this.dbs.get(db);
    if (!colls) this.dbs.set(db, (colls = new Map()));
    let c = colls.get(coll);
    if (c) return [c, false];
    c = new Collection(db, coll, options);
    colls.set(coll, c);
    return [c, true];
  }

  drop(db: string, coll: string): Collection | undefined {
    const colls = this.dbs.get(db);
    const c = colls?.get(coll);
    if (!colls || !c) return undefined;
    colls.delete(coll);
    if (colls.size === 0) this.dbs.delete(db);
    return c;
  }

  dropDatabase(db: string): boolean {
    return this.dbs.delete(db);
  }

  /** Moves a collection object under a new namespace. */
  attach(c: Collection, db: string, coll: string): void {
    let colls = this.dbs.get(db);
    if (!colls) this.dbs.set(db, (colls = new Map()));
    if (colls.has(coll)) throw new CommandError(ErrorCodes.NamespaceExists, `Collection ${db}.${coll} already exists.`);
    c.rename(db, coll);
    colls.set(coll, c);
  }

  databases(): string[] {
    return [...this.dbs.keys()].sort();
  }

  collections(db: string): Collection[] {
    return [...(this.dbs.get(db)?.values() ?? [])];
  }
}
