// Public surface of the wire-protocol codec: framing, OP_MSG, legacy OP_QUERY/OP_REPLY,
// OP_COMPRESSED, CRC-32C and cheap BSON peeks. No I/O here (large messages are decompressed in
// worker threads: inflate-pool.ts).
export * from './constants.ts';
export { WireError, type WireErrorCode } from './errors.ts';
export { Framer, type FrameSink } from './framer.ts';
export { OpMsg, parseOpMsg, opMsgBody, encodeOpMsg, retargetOpMsg, foldSequences, type DocSequence } from './op-msg.ts';
export { OpQuery, parseOpQuery, encodeOpReply } from './op-query.ts';
export {
  initCompression, compressFrame, decompressFrame, compressorName, compressedSize, compressedMoreToCome, compressedMsgHead, compressorOf,
  inflateFrame, inflatesInline,
  INLINE_INFLATE_BYTES,
} from './compression.ts';
export { InflatePool, DEFAULT_MAX_INFLATING_BYTES, type InflateOwner, type InflatePoolOptions, type InflatePoolStats } from './inflate-pool.ts';
export { crc32c } from './crc32c.ts';
export { CommandPeek, ReplyPeek } from './command-peek.ts';
export { ElementCursor, findField, firstKey, checkDocument, utf8, BSON_DOCUMENT, BSON_ARRAY, BSON_INT32, BSON_INT64, BSON_STRING } from './bson-peek.ts';
export { validateDocument, validateDocuments, checkUtf8, MAX_BSON_DEPTH } from './bson-validate.ts';
export { checkUniqueFields } from './unique-fields.ts';
