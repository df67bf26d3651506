// The legacy OP_QUERY adapter. Drivers still send their first handshake as OP_QUERY on
// `admin.$cmd`; any other command sent that way is translated to an OP_MSG body for the upstream
// (and its reply back to OP_REPLY by the ReplyWriter). Finds on a collection (the pre-3.6 query
// path) are refused. Everything is validated before the one full decode.
import { deserialize, serialize, type Document } from 'bson';
import { parseOpQuery, validateDocument, WireError } from '../wire/index.ts';
import { ErrorCodes, ProxyError } from '../errors/index.ts';

export interface LegacyCommand {
  /** The command name (its first key). */
  readonly op: string;
  /** The command, `$query` unwrapped. */
  readonly cmd: Document;
  readonly db: string;
}

export function readLegacyCommand(frame: Buffer): LegacyCommand {
  const q = parseOpQuery(frame);
  if (!q.isCommand) {
    throw new ProxyError(ErrorCodes.UnsupportedOpQueryCommand,
      `legacy OP_QUERY find on ${q.fullCollectionName} is not supported; use OP_MSG (MongoDB 3.6+ drivers)`);
  }
  let cmd = decodeCommand(q.query);
  const wrapped: unknown = cmd.$query;
  if (wrapped !== undefined && typeof wrapped === 'object' && wrapped !== null) {
    // Only an embedded document is a command: an array or another BSON value (Binary, Code, ObjectId…)
    // is no command document, and could not be sent upstream as one. Bad input, answered as such.
    if (Object.getPrototypeOf(wrapped) !== Object.prototype) {
      throw new WireError('PROXY_ERR_BAD_SECTION', `legacy OP_QUERY $query must be a document, got ${Array.isArray(wrapped) ? 'an array' :
        `a ${(wrapped as { _bsontype?: string })._bsontype ?? 'non-document value'}`}`, true);
    }
    cmd = wrapped as Document;
  }
  return { op: Object.keys(cmd)[0] ?? '', cmd, db: q.db };
}

/** The OP_MSG body a legacy command becomes upstream (`$db` from its namespace). */
export function legacyToMsgBody(c: LegacyCommand): Buffer {
  c.cmd.$db = c.db;
  try {
    return Buffer.from(serialize(c.cmd));
  } catch (err) {
    // What decodes need not encode again: a field named _bsontype makes the BSON library take a
    // plain document for one of its own types. The client's bad input, not the proxy's defect.
    throw new WireError('PROXY_ERR_BAD_BSON', `legacy OP_QUERY command cannot be re-encoded as OP_MSG: ${(err as Error).message}`, true);
  }
}

/** A command decoded whole (handshake and legacy paths only): undecodable bytes are the client's InvalidBSON, not our internal error. */
export function decodeCommand(bytes: Buffer): Document {
  validateDocument(bytes, 0, bytes.length);
  try {
    return deserialize(bytes) as Document;
  } catch (err) {
    throw new WireError('PROXY_ERR_BAD_BSON', `command is not valid BSON: ${(err as Error).message}`, true);
  }
}
