// Protocol errors raised while decoding a frame. Each has a stable code; the server turns them into
// a MongoDB error document (where a reply is possible) and counts them.

export type WireErrorCode =
  | 'PROXY_ERR_BAD_LENGTH'
  | 'PROXY_ERR_BAD_OPCODE'
  | 'PROXY_ERR_BAD_FLAGS'
  | 'PROXY_ERR_BAD_SECTION'
  | 'PROXY_ERR_BAD_BSON'
  | 'PROXY_ERR_BAD_CHECKSUM'
  | 'PROXY_ERR_BAD_COMPRESSION';

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
