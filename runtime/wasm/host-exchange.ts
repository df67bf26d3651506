// What the host functions need from the request being processed. runtime/pipeline's Exchange
// implements it; declared here so the wasm layer does not depend on the pipeline layer.
import { CallFlag, Phase } from './abi.ts';

export interface HostConnection { readonly id: number; appName: string; clientAddress: string; user: string }

export interface HostExchange {
  readonly conn: HostConnection;
  /** Tells one request from another: unique per request in the process (an exchange object may be reused by its connection's next request). */
  readonly serial: number;
  readonly pipelineId: string;
  readonly op: string;
  readonly db: string;
  readonly collection: string;
  readonly requestBody: Uint8Array;
  readonly sequences: readonly unknown[] | null;
  requestId: number;
  phase: Phase;
  verdict: number;
  rejectCode: number;
  rejectCodeName: string;
  rejectMessage: string;
  localReply: Uint8Array | null;
  newRequest: Uint8Array | null;
  replyBody: Uint8Array | null;
  newReply: Uint8Array | null;
  route: string | null;
  /** performance.now() when the proxy read the request (the `elapsed_ns` property counts from here). */
  readonly startedAt: number;
  /** The current command document: newRequest, else the body with sequences folded in (lazily, once). */
  requestDocument(): Uint8Array;
  /** The current reply's `ok` (1 when 1/true, 0 otherwise, -1 no reply) and numeric `code`: peeked
   *  once per reply body, shared by every step that asks. */
  replyOk(): number;
  replyCode(): number;
}

/** Verdict values (mirrors runtime/pipeline Verdict). */
export const VERDICT_CONTINUE = 0;
export const VERDICT_REJECT = 1;
export const VERDICT_LOCAL_REPLY = 2;

// The (size, flags) arguments of the phase callbacks, shared by core modules and components.
// Two plain functions rather than one returning a pair: no allocation per call.

/** Request phase: the command's byte size, or -1 when sequences are not folded yet (the plugin asks). */
export function requestCallSize(ex: HostExchange): number {
  if (ex.newRequest !== null) return ex.newRequest.length;
  return ex.sequences === null ? ex.requestBody.length : -1;
}

export function requestCallFlags(ex: HostExchange): number {
  if (ex.newRequest !== null) return CallFlag.BodyReplaced;
  return ex.sequences === null ? 0 : CallFlag.HasSequences;
}

/** Response phase: runs over newReply ?? replyBody ?? localReply. */
export function responseCallSize(ex: HostExchange): number {
  const reply = ex.newReply ?? ex.replyBody ?? ex.localReply;
  return reply === null ? 0 : reply.length;
}

export function responseCallFlags(ex: HostExchange): number {
  return (ex.newReply !== null ? CallFlag.BodyReplaced : 0) | (ex.verdict === VERDICT_LOCAL_REPLY ? CallFlag.LocalReply : 0);
}

/** Offset of the first occurrence of `needle` in the command (phase 0) or the current reply
 *  (phase 1), -1 when absent or there is no body: a plugin rules a body out without copying it. */
export function findInBody(ex: HostExchange, phase: number, needle: Uint8Array): number {
  const body = phase === Phase.Request ? ex.requestDocument() : (ex.newReply ?? ex.replyBody ?? ex.localReply);
  if (body === null) return -1;
  const hay = body instanceof Buffer ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return hay.indexOf(needle);
}
