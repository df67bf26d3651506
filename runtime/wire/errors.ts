// Protocol errors raised while decoding a frame. Each has a stable code from the catalogue
// (runtime/errors/catalogue.ts); the server turns them into a MongoDB error document (where a
// reply is possible) and counts them.
import type { CodesOf } from '../errors/catalogue.ts';

export type WireErrorCode = CodesOf<'WireError'>;

export class WireError extends Error {
  readonly code: WireErrorCode;
  /** false when the stream can no longer be framed and the connection must close after the reply. */
  readonly recoverable: boolean;
  constructor(code: WireErrorCode, message: string, recoverable: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'WireError';
    this.code = code;
    this.recoverable = recoverable;
  }
}
