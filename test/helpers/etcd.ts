// A real etcd for a test: `startEtcd(t)` runs /usr/bin/etcd (Debian's etcd-server 3.4) on two free
// loopback ports with a temporary data directory, waits until /health answers, and stops it (and
// removes the directory) when the test ends. The handle can stop and restart the same member (same
// data, same ports) and pause it with SIGSTOP, for the fleet's failure tests. With `tls`, the client
// URL is https (and may require client certificates).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.ts';
import { until } from './until.ts';
import type { Cleanup } from './proxy.ts';

export const ETCD_BIN = process.env.ETCD_BIN ?? '/usr/bin/etcd';

export interface RunningEtcd {
  /** The client URL (http://127.0.0.1:port), for `fleet.endpoints`. */
  readonly endpoint: string;
  readonly dataDir: string;
  /** The current process id (changes on restart). */
  pid(): number;
  /** Is it running (started and not stopped)? */
  running(): boolean;
  /** SIGTERM, waits for the exit. The data directory is kept for restart(). */
  stop(): Promise<void>;
  /** Starts the member again on the same ports and data; waits until healthy. */
  restart(): Promise<void>;
  /** SIGSTOP / SIGCONT: a member that holds its sockets open but answers nothing. */
  pause(): void;
  resume(): void;
  /** What it printed (for a failure message). */
  output(): string;
}

/** TLS on the client URL: the server's certificate and key (PEM files); with `clientCa`, clients must present a certificate it signed. */
export interface EtcdTls {
  cert: string;
  key: string;
  /** The authority of the server's certificate, for the health check. */
  ca: string;
  clientCa?: string;
  /** The client certificate and key the health check presents (with clientCa). */
  clientCert?: string;
  clientKey?: string;
}

/** GET /health over https with the test's authority (fetch takes no CA). */
function httpsHealth(url: string, tls: EtcdTls): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca: readFileSync(tls.ca), cert: tls.clientCert === undefined ? undefined : readFileSync(tls.clientCert),
      key: tls.clientKey === undefined ? undefined : readFileSync(tls.clientKey), timeout: 1000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => { body += d.toString(); });
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/** Waits until etcd's /health says true (or `ms` passes). */
async function healthy(endpoint: string, ms: number, out: () => string, tls: EtcdTls | null): Promise<void> {
  await until(() => `etcd at ${endpoint} to be healthy; it printed:\n${out().slice(-2000)}`, async () => {
    try {
      const text = tls === null ? await (await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(1000) })).text()
        : await httpsHealth(`${endpoint}/health`, tls);
      return (JSON.parse(text) as { health?: string }).health === 'true';
    } catch {
      return false;
    }
  }, ms, 100);
}

export async function startEtcd(t: Cleanup, opts: { ms?: number; tls?: EtcdTls } = {}): Promise<RunningEtcd> {
  const clientPort = await freePort();
  let peerPort = await freePort();
  while (peerPort === clientPort) peerPort = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'proxy-etcd-'));
  const tls = opts.tls ?? null;
  const endpoint = `${tls === null ? 'http' : 'https'}://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name', 'test', '--data-dir', join(dataDir, 'data'),
    '--listen-client-urls', endpoint, '--advertise-client-urls', endpoint,
    '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
    '--initial-cluster', `test=${peer}`, '--initial-cluster-state', 'new',
    '--log-level', 'warn', '--logger', 'zap',
  ];
  if (tls !== null) args.push('--cert-file', tls.cert, '--key-file', tls.key);
  if (tls?.clientCa !== undefined) args.push('--client-cert-auth', '--trusted-ca-file', tls.clientCa);
  let child: ChildProcess | null = null;
  let out = '';
  const launch = async (): Promise<void> => {
    const c = spawn(ETCD_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    c.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
    c.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
    const spawned = new Promise<void>((resolve, reject) => {
      c.once('spawn', resolve);
      c.once('error', reject);
    });
    await spawned;
    await healthy(endpoint, opts.ms ?? 30_000, () => out, tls);
  };
  const stop = async (): Promise<void> => {
    const c = child;
    if (c === null) return;
    child = null;
    if (c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    c.kill('SIGCONT');
    c.kill('SIGTERM');
    const timer = setTimeout(() => c.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  await launch();
  t.after(async () => {
    await stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    endpoint, dataDir,
    pid: () => child?.pid ?? -1,
    running: () => child !== null,
    stop,
    restart: async () => {
      if (child !== null) await stop();
      await launch();
    },
    pause: () => { child?.kill('SIGSTOP'); },
    resume: () => { child?.kill('SIGCONT'); },
    output: () => out,
  };
}
