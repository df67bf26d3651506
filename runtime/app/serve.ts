// Assembles a running proxy from a configuration: logger, development upstream (when no
// upstream.uri), upstream pool, client listener. Used by `proxy serve` and by tests.
import { loadConfig, type ProxyConfig } from '../config/index.ts';
import { Logger } from '../log/index.ts';
import { DevDbServer } from '../devdb/index.ts';
import { UpstreamPool, parseUpstreamUri } from '../upstream/index.ts';
import { ProxyServer } from '../server/index.ts';
import { initCompression } from '../wire/index.ts';

export interface RunningProxy {
  readonly config: ProxyConfig;
  readonly server: ProxyServer;
  readonly pool: UpstreamPool;
  readonly devdb: DevDbServer | null;
  readonly host: string;
  readonly port: number;
  /** The connection string clients should use. */
  readonly uri: string;
  close(): Promise<void>;
}

export function splitListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(listen.slice(i + 1)) };
}

export async function startProxy(config: ProxyConfig, log = new Logger('proxy', config.log.level, config.log.format)): Promise<RunningProxy> {
  await initCompression();
  let devdb: DevDbServer | null = null;
  let upstreamUri = config.upstream.uri;
  if (upstreamUri === undefined) {
    devdb = new DevDbServer();
    const d = await devdb.listen(config.devdb.port);
    upstreamUri = d.uri;
    log.info('no upstream.uri configured: started the embedded development upstream (in-memory, not a database)', { upstream: d.uri });
  }
  const address = parseUpstreamUri(upstreamUri);
  if (address.username !== null) {
    log.warn('upstream.uri carries credentials, but upstream authentication is not implemented yet; connecting without them');
  }
  const pool = new UpstreamPool(address, {
    poolSize: config.upstream.pool_size,
    minIdle: config.upstream.min_idle,
    maxIdleTimeMs: config.upstream.max_idle_time_ms,
    connectTimeoutMs: config.upstream.connect_timeout_ms,
    waitQueueTimeoutMs: config.upstream.wait_queue_timeout_ms,
  }, log.child('proxy::upstream'));
  await pool.start();
  const { host, port } = splitListen(config.listen);
  const server = new ProxyServer({ host, port, pool, compression: config.compression, zlibLevel: config.zlib_level, requestTimeoutMs: config.upstream.request_timeout_ms, log: log.child('proxy::server') });
  const bound = await server.listen();
  const uri = `mongodb://${bound.host}:${bound.port}/`;
  log.info('proxy listening', { listen: `${bound.host}:${bound.port}`, upstream: pool.describe(), connect: uri });
  return {
    config, server, pool, devdb, host: bound.host, port: bound.port, uri,
    async close() {
      await server.close();
      if (devdb !== null) await devdb.close();
    },
  };
}

export async function serveFromFile(file: string | undefined): Promise<RunningProxy> {
  const { config } = await loadConfig({ file });
  return startProxy(config);
}
