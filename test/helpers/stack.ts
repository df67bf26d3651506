// Test helper: a real devdb (the embedded development upstream) plus a real proxy in front of it,
// both in this process, on ephemeral 127.0.0.1 ports. Nothing is mocked: clients talk TCP to the
// proxy, the proxy talks TCP to devdb.
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { DevDbServer } from '../../runtime/devdb/index.ts';

export interface PoolOptions {
  pool_size?: number;
  min_idle?: number;
  max_idle_time_ms?: number;
  connect_timeout_ms?: number;
  wait_queue_timeout_ms?: number;
  request_timeout_ms?: number;
}

export interface StackOptions {
  /** Compressors the proxy offers (default: the proxy's own default). */
  compression?: Array<'snappy' | 'zlib' | 'zstd'>;
  /** Upstream pool settings. */
  pool?: PoolOptions;
  /** Use this upstream instead of starting a devdb. */
  upstreamUri?: string;
  /** Proxy log level (default "error" to keep test output readable; PROXY_TEST_LOG overrides). */
  logLevel?: 'trace' | 'debug' | 'info' | 'warn' | 'error';
}

export interface Stack {
  /** Connection string of the proxy. */
  readonly uri: string;
  readonly proxy: RunningProxy;
  /** The devdb this helper started (null with upstreamUri). Replaced by restartDevdb(). */
  devdb: DevDbServer | null;
  readonly devdbPort: number;
  readonly upstreamUri: string;
  /** Stops devdb (drops its connections, frees the port). */
  stopDevdb(): Promise<void>;
  /** Starts devdb again on the same port (data is kept: the same engine is reused). */
  restartDevdb(): Promise<void>;
  close(): Promise<void>;
}

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  let devdb: DevDbServer | null = null;
  let devdbPort = 0;
  let upstreamUri = opts.upstreamUri;
  if (upstreamUri === undefined) {
    devdb = new DevDbServer();
    const d = await devdb.listen(0);
    devdbPort = d.port;
    upstreamUri = d.uri;
  }
  const raw: Record<string, unknown> = {
    listen: '127.0.0.1:0',
    upstream: { uri: upstreamUri, ...(opts.pool ?? {}) },
  };
  if (opts.compression !== undefined) raw.compression = opts.compression;
  const level = (process.env.PROXY_TEST_LOG as StackOptions['logLevel']) ?? opts.logLevel ?? 'error';
  raw.log = { level };
  const config = parseConfig(raw, null);
  const proxy = await startProxy(config);
  let devdbUp = devdb !== null;
  const stack: Stack = {
    uri: proxy.uri,
    proxy,
    devdb,
    devdbPort,
    upstreamUri,
    async stopDevdb() {
      if (stack.devdb !== null && devdbUp) {
        devdbUp = false;
        await stack.devdb.close();
      }
    },
    async restartDevdb() {
      if (stack.devdb === null) throw new Error('this stack has no devdb of its own');
      if (devdbUp) return;
      const next = new DevDbServer(stack.devdb.engine);
      await next.listen(devdbPort);
      stack.devdb = next;
      devdbUp = true;
    },
    async close() {
      await proxy.close();
      await stack.stopDevdb();
    },
  };
  return stack;
}

/** Rejects after `ms` with a message naming what was being waited for. */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
