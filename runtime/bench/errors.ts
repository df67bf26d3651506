// Errors of the load generator. Each has a stable code whose exit code is the catalogue's
// (runtime/errors/catalogue.ts): a bad option is the caller's mistake (exit 2); a target that
// cannot be reached or answers nonsense is a failed run (exit 1).
import type { CodesOf } from '../errors/catalogue.ts';

export type BenchErrorCode = CodesOf<'BenchError'>;

export class BenchError extends Error {
  readonly code: BenchErrorCode;
  constructor(code: BenchErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BenchError';
    this.code = code;
  }
}
