// In-memory catalogue: databases -> collections -> documents.
// Stored documents are private deep copies and are never mutated in place: an
// update replaces the document object. That lets cursors hold references and
// copy lazily at batch time, and lets values.mingoView cache by identity.
//
// While a command of a multi-document transaction runs, the store's `undo` is that
// transaction's undo log (transactions.ts): every insert, replacement, removal and
// collection creation appends what reverts it, and an abort applies them newest first.
import { ObjectId, UUID, type Document } from 'bson';
import { CommandError, ErrorCodes, fail } from './errors.ts';
import { IndexSet } from './indexes.ts';
import { deepCopy, keyOf } from './values.ts';

/** One write of a transaction, as its undo needs it. Documents are the stored objects (never mutated). */
export type UndoEntry =
  | { op: 'insert'; coll: Collection; doc: Document }
  | { op: 'replace'; coll: Collection; before: Document; after: Document }
  | { op: 'remove'; coll: Collection; doc: Document }
  | { op: 'create'; coll: Collection };

/** Where writes are journaled: the running transaction's undo log, or null outside one. */
export interface Journal {
  undo: UndoEntry[] | null;
}

const NO_JOURNAL: Journal = { undo: null };

export class Collection {
  readonly docs = new Map<string, Document>(); // keyOf(_id) -> document, natural (insertion) order
  readonly uuid = new UUID();
  indexes: IndexSet;
  options: Document;
  private readonly journal: Journal;

  constructor(
    public db: string,
    public name: string,
    options: Document = {},
    journal: Journal = NO_JOURNAL,
  ) {
    this.options = options;
    this.indexes = new IndexSet(this.ns);
    this.journal = journal;
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
    this.journal.undo?.push({ op: 'insert', coll: this, doc });
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
    this.journal.undo?.push({ op: 'replace', coll: this, before: oldDoc, after: newDoc });
  }

  remove(doc: Document): void {
    const id = keyOf(doc._id);
    if (this.docs.get(id) !== doc) return;
    this.docs.delete(id);
    this.indexes.remove(doc, id);
    this.journal.undo?.push({ op: 'remove', coll: this, doc });
  }

  clear(): void {
    const undo = this.journal.undo;
    if (undo !== null) for (const doc of this.docs.values()) undo.push({ op: 'remove', coll: this, doc });
    this.docs.clear();
    this.indexes.clear();
  }

  /**
   * Reverts one journaled write of an aborted transaction (entries are undone newest first, so
   * the document is the one the write left). Without isolation another session may have changed
   * that document since: then the entry is skipped and the other session's write stays.
   */
  undo(e: Exclude<UndoEntry, { op: 'create' }>): void {
    switch (e.op) {
      case 'insert': {
        const id = keyOf(e.doc._id);
        if (this.docs.get(id) !== e.doc) return;
        this.docs.delete(id);
        this.indexes.remove(e.doc, id);
        return;
      }
      case 'replace': {
        const id = keyOf(e.after._id);
        if (this.docs.get(id) !== e.after) return;
        this.indexes.remove(e.after, id);
        this.docs.set(id, e.before);
        this.indexes.add(e.before, id);
        return;
      }
      case 'remove': {
        const id = keyOf(e.doc._id);
        if (this.docs.has(id)) return;
        this.docs.set(id, e.doc);
        this.indexes.add(e.doc, id);
        return;
      }
    }
  }

  all(): Document[] {
    return [...this.docs.values()];
  }
}

export class Store implements Journal {
  private readonly dbs = new Map<string, Map<string, Collection>>();
  /** The undo log of the transaction whose command is running, else null (set by transactions.ts). */
  undo: UndoEntry[] | null = null;

  reset(): void {
    this.dbs.clear();
  }

  /** Drops a collection an aborted transaction created, unless it was dropped or replaced since. */
  undoCreate(c: Collection): void {
    if (this.get(c.db, c.name) === c) this.drop(c.db, c.name);
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
    c = new Collection(db, coll, options, this);
    colls.set(coll, c);
    this.undo?.push({ op: 'create', coll: c });
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
