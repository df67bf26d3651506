// The errors a client connection answers instead of serving a request as asked — each a MongoDB
// error document the client can act on, never an exception across the socket (STYLE.md habit 3):
// a request over the size limits the handshake advertises, past clients.max_connections, read
// while draining or still in flight at the drain deadline, an unsupported opcode, bad input, or a
// defect of the proxy's. Bad input and defects are counted and logged through the shared throttle.
import { WireError, findField, utf8, type DocSequence } from '../wire/index.ts';
import { ERRORS, ErrorCodes, ProxyError } from '../errors/index.ts';
import type { ServerContext } from './context.ts';

/**
 * mongod refuses a document above maxBsonObjectSize, but a command may exceed it by this much
 * (BSONObjectMaxInternalSize: 16 MB + 16 KB) to carry its own fields around a maximal document.
 */
const COMMAND_OVERHEAD = 16 * 1024;
/** mongod's code for a document over the size limit. */
const BSON_OBJECT_TOO_LARGE = 10334;

/** The connection an error is logged for. */
interface ClientRef { readonly id: number; readonly clientAddress: string }

/**
 * Request size limits as the handshake advertises them (taken from the upstream): a message over
 * maxMessageSizeBytes, or a command document over maxBsonObjectSize plus the command overhead
 * mongod allows, is answered with an error (thrown here), never forwarded. The connection stays
 * in sync (the frame was read whole). Frames over 48,000,000 bytes never get here: the framer
 * refuses their header and the connection closes (onFrameError).
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

/**
 * The documents of an OP_MSG's document sequences (already validated whole) against the same
 * limit as the command document: mongod refuses a sequence document over maxBsonObjectSize plus
 * the command overhead when it parses the message, so the proxy answers it the same way and never
 * forwards it.
 */
export function checkSequenceSizes(sequences: readonly DocSequence[], ctx: ServerContext): void {
  const maxBson = ctx.upstreamInfo()?.maxBsonObjectSize ?? 16_777_216;
  for (let i = 0; i < sequences.length; i++) {
    const payload = sequences[i].payload;
    for (let off = 0, n = 0; off < payload.length; n++) {
      const size = payload.readInt32LE(off);
      if (size > maxBson + COMMAND_OVERHEAD) {
        ctx.stats.oversizeRequests++;
        throw new ProxyError(BSON_OBJECT_TOO_LARGE,
          `document ${n} of sequence "${sequences[i].id}" is ${size} bytes, ` +
          `larger than maxBsonObjectSize (${maxBson}) plus ${COMMAND_OVERHEAD} bytes of command overhead`);
      }
      off += size;
    }
  }
}

/**
 * The one request of a connection accepted past clients.max_connections (normally the driver's
 * handshake): SocketException "connection limit reached" (then the connection ends).
 */
export function connectionLimitReached(maxConnections: number): ProxyError {
  return new ProxyError(ErrorCodes.SocketException,
    `connection limit reached: the proxy serves at most ${maxConnections} client connections (clients.max_connections); retry later or on another proxy`);
}

/** A request read while draining: ShutdownInProgress, as mongod answers during its own shutdown. */
export function shuttingDown(): ProxyError {
  return new ProxyError(ErrorCodes.ShutdownInProgress, 'the proxy is shutting down; retry on another proxy',
    ['RetryableWriteError']);
}

/** A request still waiting for the upstream at the drain deadline (`retryable`: it carried a txnNumber). */
export function interruptedAtShutdown(op: string, retryable: boolean): ProxyError {
  return new ProxyError(ErrorCodes.InterruptedAtShutdown,
    `the proxy shut down before the upstream answered ${op || 'the request'} (shutdown.drain_timeout_ms)`,
    retryable ? ['RetryableWriteError'] : []);
}

const K_DB = utf8('$db');

/**
 * An OP_MSG command (past the handshake) whose `$db` the peek could not read: absent, not a string,
 * or empty. mongod refuses each (40571 "OP_MSG requests require a $db argument", or an invalid
 * namespace); the proxy refuses them itself because its steps and pipeline routing would judge the
 * command by an empty database name while an upstream may pick one of its own (devdb runs a
 * command without `$db` on admin), so a rule on `dbs` could be passed by leaving `$db` out.
 */
export function missingDatabase(body: Buffer): ProxyError {
  if (findField(body, K_DB) < 0) return new ProxyError(ErrorCodes.InvalidNamespace, 'OP_MSG requests require a $db argument');
  return new ProxyError(ErrorCodes.InvalidNamespace, '$db must be a non-empty string naming the database');
}

export function unsupportedOpcode(name: string): ProxyError {
  return new ProxyError(ErrorCodes.UnsupportedOpQueryCommand,
    `${name} is not supported by this proxy; use OP_MSG (MongoDB 3.6+ drivers)`);
}

/**
 * What the client is answered for `err`, thrown while its request was handled: a ProxyError as it
 * is; bad input (a WireError) counted and logged; anything else is a defect of the proxy's, not
 * bad input, logged with its stack — through the same throttle, since a client may be able to
 * trigger it at will.
 */
export function errorForThrown(err: unknown, ctx: ServerContext, conn: ClientRef): ProxyError {
  if (err instanceof WireError) {
    ctx.stats.decodeErrors++;
    logBadInput(ctx, conn, 'malformed request', err);
    return new ProxyError(ErrorCodes[ERRORS[err.code].mongo], err.message);
  }
  if (err instanceof ProxyError) return err;
  const suppressed = ctx.inputLogThrottle.take();
  if (suppressed >= 0) ctx.log.error('internal error handling a request', { conn: conn.id, error: (err as Error).stack, suppressed });
  return new ProxyError(ErrorCodes.InternalError, `proxy internal error: ${(err as Error).message}`);
}

/** One log line per bad input at most LogThrottle allows, at warn, without a stack. */
export function logBadInput(ctx: ServerContext, conn: ClientRef, msg: string, err: Error & { code?: string }): void {
  const suppressed = ctx.inputLogThrottle.take();
  if (suppressed < 0) return;
  const fields: Record<string, unknown> = { conn: conn.id, client: conn.clientAddress, error: err.message, code: err.code };
  if (suppressed > 0) fields.suppressed = suppressed;
  ctx.log.warn(msg, fields);
}
