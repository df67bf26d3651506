// Errors the proxy answers clients with. Each proxy-side failure becomes a MongoDB error document
// (`ok: 0`, `errmsg`, `code`, `codeName`, `errorLabels`) — never a closed socket while the protocol
// allows a reply (closing is a network error: drivers clear their pool and retry in a storm).
import { serialize } from 'bson';
import { codeName } from './codes.ts';

export { ErrorCodes, codeName, knownCodeName, type ErrorCodeName } from './codes.ts';
export { ERRORS, exitCodeOf, isErrorCode, isHttpErrorCode, type CodesOf, type ErrorClass, type ErrorEntry, type ExitErrorCode, type HttpErrorCode,
  type ProxyErrorCode } from './catalogue.ts';

export class ProxyError extends Error {
  readonly code: number;
  readonly codeName: string;
  readonly labels: readonly string[];
  constructor(code: number, message: string, labels: readonly string[] = [], options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProxyError';
    this.code = code;
    this.codeName = codeName(code);
    this.labels = labels;
  }
}

/** `{ ok: 0, errmsg, code, codeName[, errorLabels] }` as BSON. */
export function errorDocument(code: number, message: string, labels: readonly string[] = [], name = codeName(code)): Buffer {
  const doc: Record<string, unknown> = { ok: 0, errmsg: message, code, codeName: name };
  if (labels.length > 0) doc.errorLabels = labels;
  const bytes = serialize(doc);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
