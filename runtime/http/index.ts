export { buildAdminApp, startAdmin, type AdminOptions } from './admin.ts';
export { HttpErrors, httpError, type HttpErrorCode } from './errors.ts';
export { buildProfilingApp, startProfilingHttp, parseDurationMs, type ProfilingHttpOptions } from './profiling.ts';
export { buildControlPlane, startControlPlane, csvSamples, type ControlPlaneOptions } from './canary.ts';
