// Upstream "state change" errors are not relayed as they are (notes/mongodb-wire.md): a driver
// that reads NotWritablePrimary, NotPrimaryNoSecondaryOk, InterruptedDueToReplStateChange,
// PrimarySteppedDown, ShutdownInProgress or InterruptedAtShutdown from a server marks that server —
// here the proxy itself — Unknown and clears its connection pool, although the proxy is fine and
// has already turned to re-checking its upstream (a replica set's new primary, another router).
// Such a reply is answered instead as HostUnreachable (6): retryable for reads and writes alike,
// not a state change, so the driver retries on the connections it has, and the proxy sends the
// retry to the server its topology now selects. The upstream's code, name and message are kept in
// the message; its error labels (RetryableWriteError, TransientTransactionError) are kept as they are.
//
// The check costs a few byte compares per reply: mongod and mongos put `ok` first in an error reply
// (`{ ok: 0, errmsg, code, codeName, … }`) and last in a successful one, so only a reply whose first
// element is `ok: 0` is decoded.
import { deserialize, serialize, type Document } from 'bson';
import { encodeOpMsg, HEADER_SIZE } from '../wire/index.ts';
import { ErrorCodes } from '../errors/index.ts';
import { isStateChangeError } from '../upstream/index.ts';

/** Offset of the body's first element in an OP_MSG frame: header, flags, section kind, length. */
const FIRST = HEADER_SIZE + 4 + 1 + 4;

/**
 * When the OP_MSG `frame` is an upstream state-change error, a replacement frame (same ids, no
 * checksum) with the HostUnreachable error that the client gets instead; otherwise null.
 */
export function stateChangeReplacement(frame: Buffer, upstream: string): Buffer | null {
  // `ok` ('o' 'k' 0x00) equal to 0 as the first element of the body: a double from mongod, an
  // int32 from drivers' BSON encoders (devdb), or an int64
  if (frame.length < FIRST + 12 || frame[FIRST + 1] !== 0x6f || frame[FIRST + 2] !== 0x6b || frame[FIRST + 3] !== 0) return null;
  const type = frame[FIRST];
  if (type === 0x01) {
    if (frame.readDoubleLE(FIRST + 4) !== 0) return null;
  } else if (type === 0x10 || type === 0x12) {
    if (frame.readInt32LE(FIRST + 4) !== 0 || (type === 0x12 && frame.readInt32LE(FIRST + 8) !== 0)) return null;
  } else {
    return null;
  }
  if (frame[HEADER_SIZE + 4] !== 0) return null; // the body section comes first
  let reply: Document;
  try {
    reply = deserialize(frame.subarray(HEADER_SIZE + 5, HEADER_SIZE + 5 + frame.readInt32LE(HEADER_SIZE + 5)));
  } catch {
    return null;
  }
  const code = typeof reply.code === 'number' ? reply.code : 0;
  if (!isStateChangeError(code)) return null;
  const doc: Document = {
    ok: 0,
    errmsg: `upstream ${upstream} answered ${String(reply.codeName ?? 'error')} (${code}): ${String(reply.errmsg ?? '')}; ` +
      'the proxy is re-checking its upstream servers, retry the operation',
    code: ErrorCodes.HostUnreachable,
    codeName: 'HostUnreachable',
  };
  if (Array.isArray(reply.errorLabels) && reply.errorLabels.length > 0) doc.errorLabels = reply.errorLabels;
  return encodeOpMsg(frame.readInt32LE(4), frame.readInt32LE(8), 0, serialize(doc));
}
