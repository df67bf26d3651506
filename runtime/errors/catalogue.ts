// Every `PROXY_ERR_*` code of the proxy, in one table: which error class carries it, the HTTP
// status it is answered with where it is an HTTP answer, the exit code where a command exits with
// it, and what it means. Each error class takes its codes as keys of this table (a misspelt code
// does not compile); docs/errors.md is generated from it (runtime/errors/docs.ts), and
// test/errors/catalogue.test.ts fails when a code used in runtime/ is missing here or there.

/** The classes that carry a code; each is one section of docs/errors.md. */
export type ErrorClass =
  | 'WireError' | 'WasmHostError' | 'ConfigError' | 'HttpError' | 'CanaryError'
  | 'NotificationError' | 'ProfileError' | 'CanaryCliError' | 'PluginScaffoldError' | 'BenchError';

export interface ErrorEntry {
  readonly class: ErrorClass;
  /** The HTTP status of the answer, where an HTTP API answers with the code. */
  readonly status?: number;
  /** The exit code of the command that exits with the code. */
  readonly exit?: number;
  /** The MongoDB error (codeName) a client is answered with, for errors of the wire protocol. */
  readonly mongo?: 'ProtocolError' | 'InvalidBSON' | 'FailedToParse';
  /** One line; an HTTP answer's default message. */
  readonly meaning: string;
}

export const ERRORS = {
  // Wire protocol: a request that cannot be decoded.
  PROXY_ERR_BAD_LENGTH: { class: 'WireError', mongo: 'ProtocolError', meaning: 'a message\'s length is below the 16-byte header or above the ' +
    'largest message accepted; the stream cannot be framed, so the connection closes after the reply' },
  PROXY_ERR_BAD_FLAGS: { class: 'WireError', mongo: 'ProtocolError', meaning: 'an OP_MSG sets a required flag bit the proxy does not know' },
  PROXY_ERR_BAD_SECTION: { class: 'WireError', mongo: 'ProtocolError', meaning: 'an OP_MSG section or an OP_QUERY is truncated, malformed or has ' +
    'trailing bytes' },
  PROXY_ERR_BAD_BSON: { class: 'WireError', mongo: 'InvalidBSON', meaning: 'a document in the request is not valid BSON' },
  PROXY_ERR_DUPLICATE_FIELD: { class: 'WireError', mongo: 'FailedToParse', meaning: 'a command names a top-level field twice, or a document ' +
    'sequence has the name of a field of the command body (mongod refuses both); steps and the upstream could read different values' },
  PROXY_ERR_BAD_CHECKSUM: { class: 'WireError', mongo: 'ProtocolError', meaning: 'an OP_MSG\'s CRC-32C checksum does not match its bytes' },
  PROXY_ERR_BAD_COMPRESSION: { class: 'WireError', mongo: 'ProtocolError', meaning: 'an OP_COMPRESSED uses a compressor not negotiated on the ' +
    'connection, does not decompress, or decompresses to another size than it declares' },

  // WebAssembly plugin host.
  PROXY_ERR_PLUGIN_LOAD: { class: 'WasmHostError', exit: 1, meaning: 'a plugin module could not be read, instrumented, compiled or instantiated' },
  PROXY_ERR_PLUGIN_CONFIG_REFUSED: { class: 'WasmHostError', exit: 1, meaning: 'a plugin\'s on_configure refused its config (returned non-zero or ' +
    'trapped); the message carries the warnings it logged' },
  PROXY_ERR_PLUGIN_TRAP: { class: 'WasmHostError', meaning: 'the plugin aborted, exports no memory, or called a request function outside a ' +
    'request; the step fails as its on_error says' },
  PROXY_ERR_PLUGIN_FUEL: { class: 'WasmHostError', meaning: 'a plugin call ran out of its instruction budget (fuel); the step fails as its on_error says' },

  // Configuration.
  PROXY_ERR_CONFIG: { class: 'ConfigError', status: 400, exit: 2, meaning: 'configuration refused: a key fails the schema, or a reload finds what ' +
    'a key names unusable (an address that cannot be bound, a TLS file that cannot be read)' },

  // The HTTP APIs (admin API, profiling endpoint, control plane) and their common base.
  PROXY_ERR_UNAUTHORIZED: { class: 'HttpError', status: 401, meaning: 'missing or invalid bearer token' },
  PROXY_ERR_BAD_BODY: { class: 'HttpError', status: 400, meaning: 'request body is not valid' },
  PROXY_ERR_BAD_QUERY: { class: 'HttpError', status: 400, meaning: 'query parameters are not valid' },
  PROXY_ERR_BAD_REQUEST: { class: 'HttpError', status: 400, meaning: 'the request is not valid HTTP' },
  PROXY_ERR_PLUGIN: { class: 'HttpError', status: 422, meaning: 'a plugin refused its configuration or failed to load' },
  PROXY_ERR_RELOAD_CHANGES_ADMIN: { class: 'HttpError', status: 422, meaning: 'a reload through the admin API would close the admin API or move ' +
    'it to another address; nothing was applied (send it again with ?allow_admin_change=true to apply it)' },
  PROXY_ERR_NOT_FOUND: { class: 'HttpError', status: 404, meaning: 'no such resource' },
  PROXY_ERR_PROFILING_DISABLED: { class: 'HttpError', status: 404, meaning: 'profiling is disabled (profiling.enabled: false)' },
  PROXY_ERR_NO_CONFIG_FILE: { class: 'HttpError', status: 409, meaning: 'the proxy was started without a configuration file; send the ' +
    'configuration in the body' },
  PROXY_ERR_METHOD_NOT_ALLOWED: { class: 'HttpError', status: 405, meaning: 'the path does not take this method' },
  PROXY_ERR_REQUEST_TIMEOUT: { class: 'HttpError', status: 408, meaning: 'the request was not received in time' },
  PROXY_ERR_BODY_TOO_LARGE: { class: 'HttpError', status: 413, meaning: 'request body is too large' },
  PROXY_ERR_UNSUPPORTED_MEDIA_TYPE: { class: 'HttpError', status: 415, meaning: 'request bodies are JSON (content-type: application/json)' },
  PROXY_ERR_HEADERS_TOO_LARGE: { class: 'HttpError', status: 431, meaning: 'request headers are too large (at most 16 KiB in all)' },
  PROXY_ERR_INTERNAL: { class: 'HttpError', status: 500, meaning: 'internal error' },

  // The canary control plane.
  PROXY_ERR_CANARY_INVALID_STAGES: { class: 'CanaryError', status: 400, meaning: 'stages are not valid' },
  PROXY_ERR_CANARY_INVALID_RULES: { class: 'CanaryError', status: 400, meaning: 'rollback or auto-promote rules are not valid' },
  PROXY_ERR_CANARY_INVALID_TRAFFIC: { class: 'CanaryError', status: 400, meaning: 'traffic_pct must be an integer 0..100' },
  PROXY_ERR_CANARY_URL_REFUSED: { class: 'CanaryError', status: 400, meaning: 'a webhook, pager or gate URL names a link-local (169.254.0.0/16, ' +
    'fe80::/10) or unspecified (0.0.0.0/8, ::) address, which the canary never calls' },
  PROXY_ERR_CANARY_UNKNOWN_PIPELINE: { class: 'CanaryError', status: 400, meaning: 'no such pipeline' },
  PROXY_ERR_CANARY_CANDIDATE_REFUSED: { class: 'CanaryError', status: 400, meaning: 'the candidate graph failed to load' },
  PROXY_ERR_CANARY_NOT_FOUND: { class: 'CanaryError', status: 404, exit: 3, meaning: 'no such canary' },
  PROXY_ERR_CANARY_EXISTS: { class: 'CanaryError', status: 409, meaning: 'a canary is already running on this pipeline' },
  PROXY_ERR_CANARY_INVALID_STATE: { class: 'CanaryError', status: 409, meaning: 'not valid in the canary\'s state' },
  PROXY_ERR_CANARY_CONFLICT: { class: 'CanaryError', status: 409, meaning: 'another transition of this canary won' },
  PROXY_ERR_CANARY_NOT_SHADOW: { class: 'CanaryError', status: 409, meaning: 'the canary is not a shadow canary (it has no diffs)' },
  PROXY_ERR_CANARY_STORE_UNREACHABLE: { class: 'CanaryError', status: 503, meaning: 'the fleet store (etcd) cannot be reached; no transition was made' },

  // Canary notification delivery (outbox rows' last error, the delivery log lines).
  PROXY_ERR_SMTP_HOST_REFUSED: { class: 'NotificationError', meaning: 'the SMTP server of email channels (notifications.smtp.host) is, or ' +
    'resolves to, a link-local (169.254.0.0/16, fe80::/10) or unspecified (0.0.0.0/8, ::) address: the connection is not opened, nothing ' +
    '(no AUTH, no message) is sent, and the attempt is retried' },

  // proxy profile.
  PROXY_ERR_PROFILE_USAGE: { class: 'ProfileError', exit: 2, meaning: 'proxy profile was called with an unknown, missing or invalid option' },
  PROXY_ERR_PROFILE_UNREACHABLE: { class: 'ProfileError', exit: 1, meaning: 'the profiling endpoint did not answer (connection refused or timeout)' },
  PROXY_ERR_PROFILE_DISABLED: { class: 'ProfileError', exit: 1, meaning: 'the profiling endpoint answers that profiling is disabled' },
  PROXY_ERR_PROFILE_TOKEN: { class: 'ProfileError', exit: 1, meaning: 'the profiling endpoint refused the token (or its absence)' },
  PROXY_ERR_PROFILE_HTTP: { class: 'ProfileError', exit: 1, meaning: 'the profiling endpoint answered an error, or has no statistics for the step asked for' },
  PROXY_ERR_PROFILE_DATA: { class: 'ProfileError', exit: 1, meaning: 'an answer or a file is not what was expected (not JSON, ' +
    'no folded stacks, an answer over 64 MiB), ' +
    'or an output file cannot be written' },

  // proxy canary (its exit codes for the control plane's own codes follow the status: 404 → 3, 401 → 4, else 1).
  PROXY_ERR_CANARY_CLI_USAGE: { class: 'CanaryCliError', exit: 2, meaning: 'proxy canary was called with an unknown or missing option, or an ' +
    'unreadable or invalid file' },
  PROXY_ERR_CANARY_CLI_UNREACHABLE: { class: 'CanaryCliError', exit: 5, meaning: 'the control plane did not answer (connection refused or timeout)' },
  PROXY_ERR_CANARY_CLI_DATA: { class: 'CanaryCliError', exit: 1, meaning: 'the control plane answered something other than JSON, ' +
    'not the expected shape, or more than 64 MiB' },

  // proxy plugin new.
  PROXY_ERR_PLUGIN_BAD_NAME: { class: 'PluginScaffoldError', exit: 2, meaning: 'the plugin name is missing or not lowercase letters, digits, - and ' +
    '_ starting with a letter' },
  PROXY_ERR_PLUGIN_EXISTS: { class: 'PluginScaffoldError', exit: 2, meaning: 'the plugin folder already exists' },
  PROXY_ERR_PLUGIN_BAD_ACTION: { class: 'PluginScaffoldError', exit: 2, meaning: 'proxy plugin was given an action other than new' },

  // proxy bench.
  PROXY_ERR_BENCH_BAD_OPTION: { class: 'BenchError', exit: 2, meaning: 'a bench option is not valid' },
  PROXY_ERR_BENCH_CONNECT: { class: 'BenchError', exit: 1, meaning: 'the target could not be reached, or closed a connection' },
  PROXY_ERR_BENCH_PROTOCOL: { class: 'BenchError', exit: 1, meaning: 'the target answered something other than the expected MongoDB replies' },
} as const satisfies Record<`PROXY_ERR_${string}`, ErrorEntry>;

export type ProxyErrorCode = keyof typeof ERRORS;

/** The codes a class carries: `CodesOf<'WireError'>`. */
export type CodesOf<C extends ErrorClass> = { [K in ProxyErrorCode]: (typeof ERRORS)[K]['class'] extends C ? K : never }[ProxyErrorCode];

/** The codes an HTTP API answers with (those with a status). */
export type HttpErrorCode = { [K in ProxyErrorCode]: (typeof ERRORS)[K] extends { status: number } ? K : never }[ProxyErrorCode];

/** The codes a command exits with (those with an exit code). */
export type ExitErrorCode = { [K in ProxyErrorCode]: (typeof ERRORS)[K] extends { exit: number } ? K : never }[ProxyErrorCode];

export function isErrorCode(code: unknown): code is ProxyErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERRORS, code);
}

export function isHttpErrorCode(code: unknown): code is HttpErrorCode {
  return isErrorCode(code) && (ERRORS[code] as ErrorEntry).status !== undefined;
}

export function exitCodeOf(code: ExitErrorCode): number {
  return ERRORS[code].exit;
}
