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
  ExceededTimeLimit: 262,
  ProtocolError: 17,
  InvalidBSON: 22,
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
