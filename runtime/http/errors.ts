// The HTTP answer of an error code: its status and default message are the catalogue's
// (runtime/errors/catalogue.ts), the one table of every code the proxy has.
// Body shape: { "error": { "code": "PROXY_ERR_…", "message": "…", "details"?: … } }.
import { ERRORS, isHttpErrorCode, type HttpErrorCode } from '../errors/catalogue.ts';

export { isHttpErrorCode, type HttpErrorCode };

/** The status an HTTP API answers `code` with. */
export function httpStatus(code: HttpErrorCode): number {
  return ERRORS[code].status;
}

export function httpError(code: HttpErrorCode, message?: string, details?: unknown): { status: number; body: object } {
  const error: Record<string, unknown> = { code, message: message ?? ERRORS[code].meaning };
  if (details !== undefined) error.details = details;
  return { status: httpStatus(code), body: { error } };
}
