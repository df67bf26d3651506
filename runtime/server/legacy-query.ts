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
  if (cmd.$query !== undefined && typeof cmd.$query === 'object' && cmd.$query !== null) cmd = cmd.$query as Document;
  return { op: Object.keys(cmd)[0] ?? '', cmd, db: q.db };
}

/** The OP_MSG body a legacy command becomes upstream (`$db` from its namespace). */
export function legacyToMsgBody(c: LegacyCommand): Buffer {
  c.cmd.$db = c.db;
  return Buffer.from(serialize(c.cmd));
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
