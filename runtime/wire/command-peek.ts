// One pass over a command's top-level elements that picks out what routing, pinning and the
// pipeline need — command name, `$db`, collection, session and transaction markers, getMore's
// cursor id — without decoding anything else. One instance per connection, refilled per request.

import {
  BSON_INT64, BSON_STRING, BSON_BOOLEAN, BSON_DOCUMENT, BSON_ARRAY, ElementCursor, utf8,
} from './bson-peek.ts';
import { StringCache } from './string-cache.ts';

const K_DB = utf8('$db');
const K_LSID = utf8('lsid');
const K_TXN_NUMBER = utf8('txnNumber');
const K_START_TXN = utf8('startTransaction');
const K_AUTOCOMMIT = utf8('autocommit');
const K_COLLECTION = utf8('collection');
const K_TRACEPARENT = utf8('$traceparent');
const K_READ_PREFERENCE = utf8('$readPreference');
const K_COMMENT = utf8('comment');

/** Commands whose first value is not a collection name even when it is a string. */
const NO_COLLECTION: ReadonlySet<string> = new Set([
  'hello', 'isMaster', 'ismaster', 'ping', 'buildInfo', 'buildinfo', 'saslStart', 'saslContinue',
  'endSessions', 'killSessions', 'getParameter', 'setParameter', 'dropDatabase', 'listDatabases',
  'listCollections', 'serverStatus', 'hostInfo', 'whatsmyuri', 'getLog', 'connectionStatus',
  'commitTransaction', 'abortTransaction', 'startSession', 'explain', 'dbStats', 'getMore',
]);

/** The names, databases and collections of commands, decoded once (shared by every connection of the thread). */
export const COMMAND_STRINGS = new StringCache();

export class CommandPeek {
  op = '';
  db = '';
  collection = '';
  /** Offset of the `lsid` element's type byte, -1 when absent. */
  lsidAt = -1;
  hasTxnNumber = false;
  txnNumber = 0n;
  startTransaction = false;
  /** `autocommit: false` marks a statement inside a transaction. */
  inTransaction = false;
  /** For getMore: the cursor id (0n otherwise). */
  cursorId = 0n;
  /** Offset of a `$traceparent` element, -1 when absent (stripped by telemetry before forwarding). */
  traceparentAt = -1;
  /** Offset of a `comment` element, -1 when absent (it may carry a traceparent; see runtime/telemetry). */
  commentAt = -1;
  /** Offset of a `$readPreference` document element, -1 when absent (server selection reads it). */
  readPreferenceAt = -1;

  private readonly cur = new ElementCursor();

  /** Fills this object from the command document at `body`. Throws WireError on malformed BSON. */
  read(body: Buffer): this {
    const cur = this.cur.open(body, 0);
    this.op = '';
    this.db = '';
    this.collection = '';
    this.lsidAt = -1;
    this.hasTxnNumber = false;
    this.txnNumber = 0n;
    this.startTransaction = false;
    this.inTransaction = false;
    this.cursorId = 0n;
    this.traceparentAt = -1;
    this.commentAt = -1;
    this.readPreferenceAt = -1;
    let first = true;
    while (cur.next()) {
      if (first) {
        first = false;
        this.op = COMMAND_STRINGS.get(body, cur.nameStart, cur.nameEnd);
        if (cur.type === BSON_STRING && !NO_COLLECTION.has(this.op)) this.collection = sharedString(body, cur);
        else if (cur.type === BSON_INT64 && this.op === 'getMore') this.cursorId = cur.int64();
        continue;
      }
      // Dispatch on the first byte before comparing whole names: most keys are skipped after one test.
      switch (body[cur.nameStart]) {
        case 0x24: // '$'
          if (cur.nameIs(K_DB) && cur.type === BSON_STRING) this.db = sharedString(body, cur);
          else if (cur.nameIs(K_TRACEPARENT)) this.traceparentAt = cur.at;
          else if (cur.nameIs(K_READ_PREFERENCE) && cur.type === BSON_DOCUMENT) this.readPreferenceAt = cur.at;
          break;
        case 0x6c: // 'l'
          if (cur.nameIs(K_LSID) && cur.type === BSON_DOCUMENT) this.lsidAt = cur.at;
          break;
        case 0x74: // 't'
          if (cur.nameIs(K_TXN_NUMBER)) {
            this.hasTxnNumber = true;
            if (cur.type === BSON_INT64) this.txnNumber = cur.int64();
          }
          break;
        case 0x73: // 's'
          if (cur.nameIs(K_START_TXN) && cur.type === BSON_BOOLEAN) this.startTransaction = body[cur.valueStart] === 1;
          break;
        case 0x61: // 'a'
          if (cur.nameIs(K_AUTOCOMMIT) && cur.type === BSON_BOOLEAN) this.inTransaction = body[cur.valueStart] === 0;
          break;
        case 0x63: // 'c'
          if (cur.nameIs(K_COMMENT)) this.commentAt = cur.at;
          else if (this.op === 'getMore' && cur.nameIs(K_COLLECTION) && cur.type === BSON_STRING) this.collection = sharedString(body, cur);
          break;
      }
    }
    return this;
  }
}

/** A string element's value (its length already checked by the cursor) from COMMAND_STRINGS. */
function sharedString(body: Buffer, cur: ElementCursor): string {
  return COMMAND_STRINGS.get(body, cur.valueStart + 4, cur.valueEnd - 1);
}

const K_OK = utf8('ok');
const K_CODE = utf8('code');
const K_CODE_NAME = utf8('codeName');
const K_CURSOR = utf8('cursor');
const K_ID = utf8('id');
const K_WRITE_ERRORS = utf8('writeErrors');
const K_WC_ERROR = utf8('writeConcernError');

/**
 * What the proxy needs from a reply: success, error code, and a cursor id to pin — and, for
 * tracing, the failure the client sees (`failed`, `errorCode`, `errorName`).
 *
 * A failure is an `ok: 0` reply (its `code` and `codeName`), or an `ok: 1` write reply that
 * reports `writeErrors` (the first one's `code`, and its `codeName` when the server sends one —
 * mongod does not, so `errorName` is then '') or else a `writeConcernError` (its `code` and
 * `codeName`): the driver raises all three to the application. A successful reply pays one more
 * name comparison per top-level field (a length test, mostly) and allocates nothing: `codeName`
 * is only located during the pass, and the failure fields are read after it, only on a failure.
 * (Side by side with the class before this, on a find and an insert reply: within the noise.)
 */
export class ReplyPeek {
  ok = false;
  /** The top-level `code` (0 when absent). */
  code = 0;
  cursorId = 0n;
  hasWriteErrors = false;
  failed = false;
  /** The failure's code and code name (0 / '' when none or not sent). */
  errorCode = 0;
  errorName = '';
  private codeNameAt = -1;
  private writeErrorsAt = -1;
  private wcErrorAt = -1;
  private readonly cur = new ElementCursor();
  private readonly inner = new ElementCursor();
  /** Whether read() looks for the cursor id (false: `cursorId` stays 0n — the profiler and tracing need the status alone). */
  private readonly readsCursor: boolean;

  constructor(readsCursor = true) {
    this.readsCursor = readsCursor;
  }

  /** Reads the reply document at body[at] (a frame's offset to its body: no view of it is made). */
  read(body: Buffer, at = 0): this {
    const cur = this.cur.open(body, at);
    this.ok = false;
    this.code = 0;
    this.cursorId = 0n;
    this.hasWriteErrors = false;
    this.failed = false;
    this.errorCode = 0;
    this.errorName = '';
    this.codeNameAt = -1;
    this.writeErrorsAt = -1;
    this.wcErrorAt = -1;
    while (cur.next()) {
      if (cur.nameIs(K_OK)) this.ok = cur.number() === 1;
      else if (cur.nameIs(K_CODE)) this.code = cur.number();
      else if (cur.nameIs(K_CODE_NAME)) this.codeNameAt = cur.type === BSON_STRING ? cur.valueStart : -1;
      else if (cur.nameIs(K_WRITE_ERRORS)) {
        this.hasWriteErrors = true;
        if (cur.type === BSON_ARRAY) this.writeErrorsAt = cur.valueStart;
      } else if (cur.nameIs(K_WC_ERROR)) {
        this.hasWriteErrors = true;
        if (cur.type === BSON_DOCUMENT) this.wcErrorAt = cur.valueStart;
      } else if (this.readsCursor && cur.type === BSON_DOCUMENT && cur.nameIs(K_CURSOR)) {
        const inner = this.inner.open(body, cur.valueStart, cur.valueEnd);
        while (inner.next()) {
          if (inner.nameIs(K_ID) && inner.type === BSON_INT64) {
            this.cursorId = inner.int64();
            break;
          }
        }
      }
    }
    if (!this.ok) {
      this.failed = true;
      this.errorCode = this.code;
      if (this.codeNameAt >= 0) this.errorName = stringAt(body, this.codeNameAt);
    } else if (this.writeErrorsAt >= 0) {
      // The array's first element is the first write error (a document).
      const arr = this.inner.open(body, this.writeErrorsAt);
      if (arr.next() && arr.type === BSON_DOCUMENT) this.readError(body, arr.valueStart);
    } else if (this.wcErrorAt >= 0) {
      this.readError(body, this.wcErrorAt);
    }
    return this;
  }

  /** `code` and `codeName` of the error document at `off`. */
  private readError(body: Buffer, off: number): void {
    this.failed = true;
    const e = this.inner.open(body, off);
    while (e.next()) {
      if (e.nameIs(K_CODE)) this.errorCode = e.number();
      else if (e.nameIs(K_CODE_NAME) && e.type === BSON_STRING) this.errorName = e.string();
    }
  }
}

/** The string value whose length prefix is at `off`. */
function stringAt(body: Buffer, off: number): string {
  return body.toString('utf8', off + 4, off + 4 + body.readInt32LE(off) - 1);
}
