// Every HTTP error the proxy's APIs answer with: one table, stable codes, a status each.
// Body shape: { "error": { "code": "PROXY_ERR_…", "message": "…", "details"?: … } }.
export const HttpErrors = {
  PROXY_ERR_UNAUTHORIZED: { status: 401, message: 'missing or invalid bearer token' },
  PROXY_ERR_BAD_BODY: { status: 400, message: 'request body is not valid' },
  PROXY_ERR_CONFIG: { status: 400, message: 'configuration refused' },
  PROXY_ERR_PLUGIN: { status: 422, message: 'a plugin refused its configuration or failed to load' },
  PROXY_ERR_NOT_FOUND: { status: 404, message: 'no such resource' },
  PROXY_ERR_PROFILING_DISABLED: { status: 404, message: 'profiling is disabled (profiling.enabled: false)' },
  PROXY_ERR_BAD_QUERY: { status: 400, message: 'query parameters are not valid' },
  PROXY_ERR_NO_CONFIG_FILE: { status: 409, message: 'the proxy was started without a configuration file; send the configuration in the body' },
  PROXY_ERR_CANARY_INVALID_STAGES: { status: 400, message: 'stages are not valid' },
  PROXY_ERR_CANARY_INVALID_RULES: { status: 400, message: 'rollback or auto-promote rules are not valid' },
  PROXY_ERR_CANARY_INVALID_TRAFFIC: { status: 400, message: 'traffic_pct must be an integer 0..100' },
  PROXY_ERR_CANARY_UNKNOWN_PIPELINE: { status: 400, message: 'no such pipeline' },
  PROXY_ERR_CANARY_CANDIDATE_REFUSED: { status: 400, message: 'the candidate graph failed to load' },
  PROXY_ERR_CANARY_NOT_FOUND: { status: 404, message: 'no such canary' },
  PROXY_ERR_CANARY_EXISTS: { status: 409, message: 'a canary is already running on this pipeline' },
  PROXY_ERR_CANARY_INVALID_STATE: { status: 409, message: 'not valid in the canary\'s state' },
  PROXY_ERR_CANARY_CONFLICT: { status: 409, message: 'another transition of this canary won' },
  PROXY_ERR_CANARY_NO_METRICS: { status: 409, message: 'profiling is disabled: no per-graph metrics to decide on' },
  PROXY_ERR_BAD_REQUEST: { status: 400, message: 'the request is not valid HTTP' },
  PROXY_ERR_METHOD_NOT_ALLOWED: { status: 405, message: 'the path does not take this method' },
  PROXY_ERR_REQUEST_TIMEOUT: { status: 408, message: 'the request was not received in time' },
  PROXY_ERR_BODY_TOO_LARGE: { status: 413, message: 'request body is too large' },
  PROXY_ERR_UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'request bodies are JSON (content-type: application/json)' },
  PROXY_ERR_HEADERS_TOO_LARGE: { status: 431, message: 'request headers are too large (at most 16 KiB in all)' },
  PROXY_ERR_INTERNAL: { status: 500, message: 'internal error' },
} as const;

export type HttpErrorCode = keyof typeof HttpErrors;

export function httpError(code: HttpErrorCode, message?: string, details?: unknown): { status: number; body: object } {
  const e = HttpErrors[code];
  const error: Record<string, unknown> = { code, message: message ?? e.message };
  if (details !== undefined) error.details = details;
  return { status: e.status, body: { error } };
}
