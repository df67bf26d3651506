// Test helper: a real `proxy serve --workers 2` with its admin API and profiling endpoint on free
// ports, a `metrics` response step, and the admin API's JSON answers (`GET /api/v1/workers` …).
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './ports.ts';
import { spawnServe, type Served } from './serve.ts';

export const WORKERS_TOKEN = 'workers-test-token-0123';

export interface Started { served: Served; port: number; admin: string; profiling: string; file: string; config: Record<string, unknown> }

/**
 * Writes `<dir>/<name>.json` (the base configuration with `extra`'s keys over it) and serves it with
 * two workers; `spawned` sees the primary as soon as it exists.
 */
export async function startWorkers(dir: string, name: string, extra: Record<string, unknown> = {},
  spawned?: (primary: ChildProcess) => void): Promise<Started> {
  const [port, adminPort, profilingPort] = [await freePort(), await freePort(), await freePort()];
  const config = {
    listen: `127.0.0.1:${port}`, log: { level: 'warn' },
    admin: { listen: `127.0.0.1:${adminPort}`, token: WORKERS_TOKEN, reload_on_change: false },
    profiling: { enabled: true, port: profilingPort, alert_on_slow_step: false },
    pipeline: { response: ['metrics'] }, ...extra,
  };
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(config));
  const served = await spawnServe(['--config', file, '--workers', '2'], undefined, spawned);
  return { served, port, admin: `http://127.0.0.1:${adminPort}`, profiling: `http://127.0.0.1:${profilingPort}`, file, config };
}

/** An admin API call with the token; the answer's status and JSON body. */
export async function admin<T>(s: Started, path: string, init: RequestInit = {}): Promise<{ status: number; body: T }> {
  const res = await fetch(`${s.admin}${path}`, { ...init, headers: { authorization: `Bearer ${WORKERS_TOKEN}`, 'content-type': 'application/json' } });
  return { status: res.status, body: await res.json() as T };
}
