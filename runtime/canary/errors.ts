// Why the controller refuses a request. The codes and their HTTP statuses are the catalogue's
// (runtime/errors/catalogue.ts): its CanaryError codes, and PROXY_ERR_BAD_BODY for a malformed
// field; test/canary/api.test.ts checks each is documented in docs/canary.md.
import { ERRORS, type CodesOf, type ProxyErrorCode } from '../errors/catalogue.ts';

export type CanaryErrorCode = CodesOf<'CanaryError'> | 'PROXY_ERR_BAD_BODY';

export const CANARY_ERROR_CODES: readonly CanaryErrorCode[] = [
  'PROXY_ERR_BAD_BODY',
  ...(Object.keys(ERRORS) as ProxyErrorCode[]).filter((c): c is CodesOf<'CanaryError'> => ERRORS[c].class === 'CanaryError'),
];

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
