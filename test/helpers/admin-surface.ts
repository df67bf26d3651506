// An admin API over a log ring and nothing else (no proxy, no upstream): for tests of the admin
// app's own routes, driven with fastify's inject().
import { buildAdminApp } from '../../runtime/http/admin.ts';
import type { AdminSurface } from '../../runtime/http/surface.ts';
import type { LogRing } from '../../runtime/log/index.ts';

export function ringOnlyAdminApp(ring: LogRing, token: string, workerCount?: number): ReturnType<typeof buildAdminApp> {
  const surface: AdminSurface = {
    readiness: async () => ({ ready: true, upstream: null }),
    metrics: { contentType: 'text/plain', text: async () => '' },
    logRing: ring,
    pipeline: () => ({ id: 'default', request: [], response: [] }),
    adminListen: () => null,
    workers: async () => ({ workers: [], replaced: 0, unresponsive: 0, start_failures: 0, pin_lookups: { found: 0, missed: 0 } }),
    reload: async () => {},
    ...(workerCount === undefined ? {} : { workerCount }),
  };
  return buildAdminApp(surface, { token, configFile: null });
}
