export { buildAdminApp, startAdmin, ADMIN_BODY_LIMIT_BYTES, FOLLOW_MAX_UNSENT_BYTES, type AdminOptions } from './admin.ts';
export { httpError, httpStatus, isHttpErrorCode, type HttpErrorCode } from './errors.ts';
export { buildProfilingApp, startProfilingHttp, parseDurationMs, type ProfilingHttpOptions } from './profiling.ts';
export { buildControlPlane, startControlPlane, csvSamples, CONTROL_PLANE_BODY_LIMIT_BYTES, FEED_MAX_UNSENT_BYTES, type ControlPlaneOptions } from './canary.ts';
export {
  createApp, listenApp, parseJsonBody, HttpError, ConnectionCap, DISCARD_LIMIT_BYTES, REQUEST_TIMEOUT_MS, CLOSE_GRACE_MS, type AppOptions,
} from './app.ts';
export { Tokens } from './tokens.ts';
