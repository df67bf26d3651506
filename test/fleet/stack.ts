// A fleet for the end-to-end tests: a real etcd (test/helpers/etcd.ts) and N real proxy processes
// (`proxy serve` children, each with its own embedded upstream and control plane), all in one
// fleet (fleet.store: etcd, one prefix); one process each unless `workersOf` gives one workers. Each
// instance can be killed (-9), paused (SIGSTOP) and resumed; calls to its control plane and a
// traffic loop through it are at hand.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';
import { startEtcd, type RunningEtcd } from '../helpers/etcd.ts';
import type { Cleanup } from '../helpers/proxy.ts';

export const TOKEN = 'fleet-e2e-token-0123456789';
const bin = join(process.cwd(), 'bin/proxy.mjs');

export interface Instance {
  id: string;
  uri: string;
  controlUrl: string;
  child: ChildProcess;
  output(): string;
  /** A control-plane call: status and parsed JSON body. */
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  kill(signal: NodeJS.Signals): void;
  alive(): boolean;
}

export interface Fleet {
  etcd: RunningEtcd;
  dir: string;
  instances: Instance[];
  byId(id: string): Instance;
  /** The leader as the live instances agree on it. */
  leader(): Promise<string | null>;
}

/** Per-instance configuration laid over the common one (e.g. canary.plugin_dirs). */
export type Extra = (index: number, dir: string) => Record<string, unknown>;

export interface FleetOptions {
  /** Lease TTL, s (default 2). */
  ttl?: number;
  extra?: Extra;
  /** Keys laid over every instance's `fleet` block, or one instance's (`fleetOf`). */
  fleet?: Record<string, unknown>;
  fleetOf?: (index: number, root: string) => Record<string, unknown>;
  /** Worker processes of instance `index` (`--workers`; default 1: one process, whatever the default of `proxy serve`). */
  workersOf?: (index: number) => number;
}

export async function startFleet(t: Cleanup, n = 3, o: FleetOptions = {}): Promise<Fleet> {
  const etcd = await startEtcd(t);
  const dir = mkdtempSync(join(tmpdir(), 'proxy-fleet-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const instances = await Promise.all(Array.from({ length: n }, (_, i) => startInstance(t, etcd, dir, i + 1, o)));
  const fleet: Fleet = {
    etcd, dir, instances,
    byId: (id) => instances.find((x) => x.id === id)!,
    async leader() {
      for (const x of instances) {
        if (!x.alive()) continue;
        try {
          const r = await x.call('GET', '/api/v1/fleet');
          if (r.status === 200) return r.body.leader as string | null;
        } catch {
          // paused or gone: ask the next
        }
      }
      return null;
    },
  };
  await until('every instance registered and a leader elected', async () => {
    const r = await instances[0].call('GET', '/api/v1/fleet');
    return r.body.instances?.length === n && r.body.leader !== null;
  }, 30_000, 100);
  return fleet;
}

async function startInstance(t: Cleanup, etcd: RunningEtcd, root: string, index: number, o: FleetOptions): Promise<Instance> {
  const id = `i${index}`;
  const dir = join(root, id);
  const [port, cp] = [await freePort(), await freePort()];
  const config = join(root, `${id}.json`);
  writeFileSync(config, JSON.stringify({
    listen: `127.0.0.1:${port}`,
    log: { level: 'info', format: 'json' },
    pipeline: { id: 'default', request: [], response: [] },
    control_plane: { port: cp, tokens: [TOKEN] },
    canary: { data_dir: join(dir, 'canary') },
    notifications: { outbox_path: join(dir, 'outbox.db') },
    fleet: { store: 'etcd', endpoints: [etcd.endpoint], prefix: '/fleet-e2e', instance_id: id, lease_ttl_s: o.ttl ?? 2, ...o.fleet,
      ...o.fleetOf?.(index, root) },
    ...o.extra?.(index, dir),
  }));
  let out = '';
  const workers = String(o.workersOf?.(index) ?? 1);
  const child = spawn(process.execPath, [bin, 'serve', '--config', config, '--workers', workers], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => { out += d; });
  child.stderr!.on('data', (d: Buffer) => { out += d; });
  t.after(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
  });
  await until(() => `instance ${id} to start:\n${out.slice(-3000)}`, () => out.includes('is ready') || child.exitCode !== null, 90_000, 100);
  assert.ok(out.includes('is ready'), out);
  const controlUrl = `http://127.0.0.1:${cp}`;
  return {
    id, uri: `mongodb://127.0.0.1:${port}/?directConnection=true`, controlUrl, child,
    output: () => out,
    async call(method, path, body) {
      const started = Date.now();
      try {
        // Longer than the proxy's own bound: a canary create waits for every other instance's check
        // of the candidate (up to 30 s), and an instance that has loaded no plugin yet spends ~2 s of
        // CPU starting binaryen for its first one, three instances at once on a loaded CI machine.
        const res = await fetch(`${controlUrl}${path}`, {
          method, signal: AbortSignal.timeout(45_000),
          headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: await res.json() as any };
      } catch (err) {
        // Which instance, which call, after how long, and what the instance said last: a bare
        // "aborted due to timeout" names none of them.
        const state = child.exitCode === null && child.signalCode === null ? 'runs' : 'has exited';
        throw new Error(`${id} ${method} ${path} failed after ${Date.now() - started} ms (${(err as Error).message}); ` +
          `the instance ${state}, its last output:\n${out.slice(-4000)}`, { cause: err });
      }
    },
    kill: (signal) => { child.kill(signal); },
    alive: () => child.exitCode === null && child.signalCode === null,
  };
}

/** Finds through an instance until stop(); a share carries k: "bad" (a filter candidate may deny those). */
export function traffic(uri: string, badEvery = 5, workers = 3) {
  // A find that hangs fails after 20 s (counted, and stop() returns) instead of holding the test to its file's timeout.
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10_000, socketTimeoutMS: 20_000, maxPoolSize: workers });
  const counts = { ok: 0, denied: 0, failed: 0 };
  let running = true;
  const loops = Array.from({ length: workers }, async (_, w) => {
    let i = 0;
    while (running) {
      const bad = (i++ + w) % badEvery === 0;
      try {
        await client.db('app').collection('items').find({ k: bad ? 'bad' : 'good' }).limit(1).toArray();
        counts.ok++;
      } catch (err) {
        if (err instanceof MongoServerError && err.code === 13) counts.denied++;
        else {
          counts.failed++;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    }
  });
  return {
    counts,
    async stop() {
      running = false;
      await Promise.all(loops);
      await client.close();
    },
  };
}

/** An instance's arms as it serves them now (cumulative since the split began there). */
export async function arms(x: Instance): Promise<{ baseline: number; candidate: number }> {
  const r = await x.call('GET', '/api/v1/fleet/evidence/default');
  return { baseline: r.body.arms.baseline?.requests ?? 0, candidate: r.body.arms.candidate?.requests ?? 0 };
}
