// The error answer every HTTP app of the proxy sends: the code's status and the one body shape.
import type { FastifyReply } from 'fastify';
import { httpError, type HttpErrorCode } from './errors.ts';

/** Answers with the error's status and `{ "error": { code, message, details? } }`. */
export function sendError(reply: FastifyReply, code: HttpErrorCode, message?: string, details?: unknown): FastifyReply {
  const e = httpError(code, message, details);
  // Also on the answers fastify gives before any hook runs (a path that does not decode).
  reply.header('x-content-type-options', 'nosniff');
  return reply.code(e.status).send(e.body);
}
