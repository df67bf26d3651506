// Error codes and codeNames used by the devdb command engine (subset of mongod's
// error_codes.yml). Every code the engine emits must be listed here so that each
// reply carries the matching codeName.
import type { Document } from 'bson';

export const ErrorCodes = {
  InternalError: 1,
  BadValue: 2,
  FailedToParse: 9,
  Unauthorized: 13,
  TypeMismatch: 14,
  InvalidLength: 16,
  IllegalOperation: 20,
  NamespaceNotFound: 26,
  IndexNotFound: 27,
  ConflictingUpdateOperators: 40,
  CursorNotFound: 43,
  NamespaceExists: 48,
  DollarPrefixedFieldName: 52,
  CommandNotFound: 59,
  ImmutableField: 66,
  InvalidOptions: 72,
  InvalidNamespace: 73,
  IndexOptionsConflict: 85,
  IndexKeySpecsConflict: 86,
  CommandNotSupported: 115,
  InvalidPipelineOperator: 168,
  TransactionTooOld: 225,
  NoSuchTransaction: 251,
  TransactionCommitted: 256,
  OperationNotSupportedInTransaction: 263,
  NotWritablePrimary: 10107,
  NotPrimaryNoSecondaryOk: 13435,
  NoMatchingDocument: 47,
  DuplicateKey: 11000,
  MergeStageNoMatchingDocument: 13113,
  UnrecognizedPipelineStage: 40324,
} as const;

export type ErrorCodeName = keyof typeof ErrorCodes;

const NAMES: Record<number, string> = {};
for (const [name, code] of Object.entries(ErrorCodes)) NAMES[code] = name;
// mongod reports assertion-site codes as "Location<code>".
NAMES[40324] = 'Location40324';

export function codeName(code: number): string {
  return NAMES[code] ?? `Location${code}`;
}

/** An error that the engine turns into an `{ ok: 0 }` reply. */
export class CommandError extends Error {
  readonly code: number;
  readonly extra: Document | undefined;
  constructor(code: number, errmsg: string, extra?: Document) {
    super(errmsg);
    this.code = code;
    this.extra = extra;
  }
  toReply(): Document {
    return { ok: 0, errmsg: this.message, code: this.code, codeName: codeName(this.code), ...(this.extra ?? {}) };
  }
}

export function fail(name: ErrorCodeName, errmsg: string, extra?: Document): never {
  throw new CommandError(ErrorCodes[name], errmsg, extra);
}

/**
 * Maps an exception thrown by mingo (or anything else) to a CommandError with a
 * mongod-like code. mingo throws plain Errors with descriptive messages.
 */
export function toCommandError(e: unknown): CommandError {
  if (e instanceof CommandError) return e;
  const msg = e instanceof Error ? e.message : String(e);
  let m: RegExpMatchArray | null;
  if (/would modify the immutable field '_id'/.test(msg))
    return new CommandError(ErrorCodes.ImmutableField, msg.replace(/\.$/, ''));
  if ((m = msg.match(/unknown query operator (\$\w+)/i))) return new CommandError(ErrorCodes.BadValue, `unknown operator: ${m[1]}`);
  if ((m = msg.match(/unregistered pipeline operator (\$\w+)/i)))
    return new CommandError(ErrorCodes.UnrecognizedPipelineStage, `Unrecognized pipeline stage name: '${m[1]}'`);
  if ((m = msg.match(/Unknown update operator: '(\$\w+)'/i)))
    return new CommandError(
      ErrorCodes.FailedToParse,
      `Unknown modifier: ${m[1]}. Expected a valid update modifier or pipeline-style update specified as an array`,
    );
  if ((m = msg.match(/unregistered \w+ operator (\$\w+)/i)) || (m = msg.match(/unknown \w+ operator:? '?(\$\w+)/i)))
    return new CommandError(ErrorCodes.InvalidPipelineOperator, `Unrecognized expression '${m[1]}'`);
  return new CommandError(ErrorCodes.BadValue, msg);
}
