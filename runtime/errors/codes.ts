// MongoDB server error codes the proxy itself answers with, and their codeNames.
// Source: mongo/src/mongo/base/error_codes.yml (server repository).
export const ErrorCodes = {
  InternalError: 1,
  BadValue: 2,
  HostUnreachable: 6,
  FailedToParse: 9,
  Unauthorized: 13,
  TypeMismatch: 14,
  AuthenticationFailed: 18,
  IllegalOperation: 20,
  NetworkTimeout: 89,
  FailedToSatisfyReadPreference: 133,
  ShutdownInProgress: 91,
  InterruptedAtShutdown: 11600,
  CommandNotFound: 59,
  InvalidNamespace: 73,
  ExceededTimeLimit: 262,
  ProtocolError: 17,
  InvalidBSON: 22,
  ClientMetadataAppNameTooLarge: 184,
  ClientMetadataDocumentTooLarge: 185,
  ClientMetadataCannotBeMutated: 186,
  UnsupportedOpQueryCommand: 352,
  UnsupportedFormat: 115,
  SocketException: 9001,
  RateLimitExceeded: 462,
  MechanismUnavailable: 334,
} as const;

export type ErrorCodeName = keyof typeof ErrorCodes;

const NAMES = new Map<number, string>(Object.entries(ErrorCodes).map(([k, v]) => [v, k]));

export function codeName(code: number): string {
  return NAMES.get(code) ?? 'UnknownError';
}

/**
 * Server codes that reach the proxy without their name: a write reply's `writeErrors` entries
 * carry only `code` (mongod sends `codeName` on `ok: 0` replies and write concern errors). The
 * codes a write error commonly has; tracing names the rest by the number. Source as above.
 */
const WRITE_ERROR_NAMES = new Map<number, string>([
  [2, 'BadValue'], [9, 'FailedToParse'], [13, 'Unauthorized'], [14, 'TypeMismatch'], [28, 'PathNotViable'],
  [50, 'MaxTimeMSExpired'], [52, 'DollarPrefixedFieldName'], [55, 'InvalidDBRef'], [56, 'EmptyFieldName'],
  [57, 'DottedFieldName'], [61, 'ShardKeyNotFound'], [66, 'ImmutableField'], [112, 'WriteConflict'],
  [121, 'DocumentValidationFailure'], [10334, 'BSONObjectTooLarge'], [11000, 'DuplicateKey'],
]);

/** The server's name for `code` when it is one the proxy knows (its own or a write error's), else undefined. */
export function knownCodeName(code: number): string | undefined {
  return NAMES.get(code) ?? WRITE_ERROR_NAMES.get(code);
}
