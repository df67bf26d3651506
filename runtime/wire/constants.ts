// Wire-protocol constants. Layouts: https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/
// and the OP_MSG spec (github.com/mongodb/specifications, source/message/OP_MSG.md).

export const OP_REPLY = 1;
export const OP_UPDATE = 2001;
export const OP_INSERT = 2002;
export const OP_QUERY = 2004;
export const OP_GET_MORE = 2005;
export const OP_DELETE = 2006;
export const OP_KILL_CURSORS = 2007;
export const OP_COMPRESSED = 2012;
export const OP_MSG = 2013;

/** Standard message header: messageLength, requestID, responseTo, opCode (4 × int32 LE). */
export const HEADER_SIZE = 16;

/** Smallest and largest frames we accept. 48,000,000 is MongoDB's maxMessageSizeBytes. */
export const MIN_MESSAGE_SIZE = HEADER_SIZE;
export const MAX_MESSAGE_SIZE = 48_000_000;
export const MAX_BSON_OBJECT_SIZE = 16 * 1024 * 1024;
export const MAX_WRITE_BATCH_SIZE = 100_000;

// OP_MSG flag bits.
export const MSG_CHECKSUM_PRESENT = 1 << 0;
export const MSG_MORE_TO_COME = 1 << 1;
export const MSG_EXHAUST_ALLOWED = 1 << 16;
/** The low 16 bits are "required": a receiver must reject bits it does not know. */
export const MSG_REQUIRED_BITS_MASK = 0xffff;
export const MSG_KNOWN_REQUIRED_BITS = MSG_CHECKSUM_PRESENT | MSG_MORE_TO_COME;

// OP_MSG section kinds.
export const SECTION_BODY = 0;
export const SECTION_DOCUMENT_SEQUENCE = 1;

// OP_QUERY flag bits (only the ones we look at).
export const QUERY_SECONDARY_OK = 1 << 2;
export const QUERY_EXHAUST = 1 << 6;

// OP_REPLY response flags.
export const REPLY_CURSOR_NOT_FOUND = 1 << 0;
export const REPLY_QUERY_FAILURE = 1 << 1;
export const REPLY_AWAIT_CAPABLE = 1 << 3;

// Compressor ids, as negotiated in hello's `compression` array.
export const COMPRESSOR_NOOP = 0;
export const COMPRESSOR_SNAPPY = 1;
export const COMPRESSOR_ZLIB = 2;
export const COMPRESSOR_ZSTD = 3;

export type CompressorName = 'snappy' | 'zlib' | 'zstd';

export const COMPRESSOR_IDS: Readonly<Record<CompressorName, number>> = {
  snappy: COMPRESSOR_SNAPPY,
  zlib: COMPRESSOR_ZLIB,
  zstd: COMPRESSOR_ZSTD,
};

/**
 * Commands whose messages must never be compressed (OP_COMPRESSED spec, "Messages that must not be
 * compressed"): the handshake and authentication traffic.
 */
export const UNCOMPRESSIBLE_COMMANDS: ReadonlySet<string> = new Set([
  'hello', 'isMaster', 'ismaster', 'saslStart', 'saslContinue', 'getnonce', 'authenticate',
  'createUser', 'updateUser', 'copydbSaslStart', 'copydbgetnonce', 'copydb',
]);

export function opcodeName(op: number): string {
  switch (op) {
    case OP_REPLY: return 'OP_REPLY';
    case OP_UPDATE: return 'OP_UPDATE';
    case OP_INSERT: return 'OP_INSERT';
    case OP_QUERY: return 'OP_QUERY';
    case OP_GET_MORE: return 'OP_GET_MORE';
    case OP_DELETE: return 'OP_DELETE';
    case OP_KILL_CURSORS: return 'OP_KILL_CURSORS';
    case OP_COMPRESSED: return 'OP_COMPRESSED';
    case OP_MSG: return 'OP_MSG';
    default: return `opcode ${op}`;
  }
}
