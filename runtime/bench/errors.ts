// Errors of the load generator. Each has a stable code so the CLI can map them to exit codes:
// a bad option is the caller's mistake (exit 2); a target that cannot be reached or answers
// nonsense is a failed run (exit 1).

export type BenchErrorCode =
  | 'PROXY_ERR_BENCH_BAD_OPTION'
  | 'PROXY_ERR_BENCH_CONNECT'
  | 'PROXY_ERR_BENCH_PROTOCOL';

export class BenchError extends Error {
  readonly code: BenchErrorCode;
  constructor(code: BenchErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BenchError';
    this.code = code;
  }
}
