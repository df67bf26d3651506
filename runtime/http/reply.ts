// What every HTTP app of the proxy (admin, profiling) shares: the error answer and the bearer-token
// check, compared in constant time.
import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import { httpError, type HttpErrorCode } from './errors.ts';

/** Answers with the error's status and `{ "error": { code, message, details? } }`. */
export function sendError(reply: FastifyReply, code: HttpErrorCode, message?: string, details?: unknown): FastifyReply {
  const e = httpError(code, message, details);
  return reply.code(e.status).send(e.body);
}

/** Whether an Authorization header carries exactly `Bearer <token>`. */
export function tokenMatches(header: string | undefined, token: string): boolean {
  if (header === undefined || !header.startsWith('Bearer ')) return false;
  const given = Buffer.from(header.slice(7));
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}
