// Request size limits as the handshake advertises them (taken from the upstream).
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import type { ServerContext } from './context.ts';

/**
 * mongod refuses a document above maxBsonObjectSize, but a command may exceed it by this much
 * (BSONObjectMaxInternalSize: 16 MB + 16 KB) to carry its own fields around a maximal document.
 */
const COMMAND_OVERHEAD = 16 * 1024;
/** mongod's code for a document over the size limit. */
const BSON_OBJECT_TOO_LARGE = 10334;

/**
 * A message over maxMessageSizeBytes, or a command document over maxBsonObjectSize plus the
 * command overhead mongod allows, is answered with an error (thrown here), never forwarded. The
 * connection stays in sync (the frame was read whole). Frames over 48,000,000 bytes never get
 * here: the framer refuses their header and the connection closes (onFrameError).
 */
export function checkRequestSize(frameBytes: number, bodyBytes: number, ctx: ServerContext): void {
  const info = ctx.upstreamInfo();
  const maxMessage = info?.maxMessageSizeBytes ?? 48_000_000;
  const maxBson = info?.maxBsonObjectSize ?? 16_777_216;
  if (frameBytes > maxMessage) {
    ctx.stats.oversizeRequests++;
    throw new ProxyError(ErrorCodes.BadValue, `message of ${frameBytes} bytes is larger than maxMessageSizeBytes (${maxMessage})`);
  }
  if (bodyBytes > maxBson + COMMAND_OVERHEAD) {
    ctx.stats.oversizeRequests++;
    throw new ProxyError(BSON_OBJECT_TOO_LARGE,
      `command document of ${bodyBytes} bytes is larger than maxBsonObjectSize (${maxBson}) plus ${COMMAND_OVERHEAD} bytes of command overhead`);
  }
}
