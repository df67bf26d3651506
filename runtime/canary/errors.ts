// Why the controller refuses a request. The code is stable and maps to an HTTP status in the one
// table of HTTP errors (runtime/http/errors.ts); test/canary/api.test.ts checks every code is there
// and documented in docs/canary.md.
export const CANARY_ERROR_CODES = [
  'PROXY_ERR_BAD_BODY',
  'PROXY_ERR_CANARY_INVALID_STAGES',
  'PROXY_ERR_CANARY_INVALID_RULES',
  'PROXY_ERR_CANARY_INVALID_TRAFFIC',
  'PROXY_ERR_CANARY_UNKNOWN_PIPELINE',
  'PROXY_ERR_CANARY_CANDIDATE_REFUSED',
  'PROXY_ERR_CANARY_NOT_FOUND',
  'PROXY_ERR_CANARY_EXISTS',
  'PROXY_ERR_CANARY_INVALID_STATE',
  'PROXY_ERR_CANARY_CONFLICT',
] as const;

export type CanaryErrorCode = typeof CANARY_ERROR_CODES[number];

export class CanaryError extends Error {
  readonly code: CanaryErrorCode;
  readonly details: unknown;
  constructor(code: CanaryErrorCode, message: string, details?: unknown, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'CanaryError';
    this.code = code;
    this.details = details;
  }
}
