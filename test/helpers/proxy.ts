// A proxy for a test, closed when the test (or the file) ends: withProxy(t, config) starts it on
// 127.0.0.1 port 0, logging at `error` (PROXY_TEST_LOG overrides), in front of the embedded
// development upstream (the proxy's own devdb, closed with it) unless `config.upstream.uri` names
// one, and registers its close with t.after.
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy, type StartOptions } from '../../runtime/app/serve.ts';

/** A test's context, or `{ after }` from node:test for a proxy the whole file shares. */
export interface Cleanup {
  after(fn: () => unknown): void;
}

/**
 * Closes collected to run at a chosen point of a file's teardown: after its clients, before the
 * upstream the proxies talk to (`after(async () => { …clients; await proxies.run(); …upstream })`).
 */
export class Closes implements Cleanup {
  private readonly fns: Array<() => unknown> = [];
  after(fn: () => unknown): void {
    this.fns.push(fn);
  }
  /** Runs every close in the order given; then throws the first that failed, if any. */
  async run(): Promise<void> {
    let failed: { err: unknown } | null = null;
    for (const fn of this.fns.splice(0)) {
      try {
        await fn();
      } catch (err) {
        failed ??= { err };
      }
    }
    if (failed !== null) throw failed.err;
  }
}

export interface WithProxy {
  readonly proxy: RunningProxy;
  /** The proxy's connection string. */
  readonly uri: string;
}

/**
 * `config` is raw configuration, as in a file, laid over `listen` and `log`. Closes run in the
 * order t.after was called: pass the file's `after` when clients closed by an earlier hook must
 * go first.
 */
export async function withProxy(t: Cleanup, config: Record<string, unknown> = {}, opts: StartOptions = {}): Promise<WithProxy> {
  const level = process.env.PROXY_TEST_LOG ?? 'error';
  const proxy = await startProxy(parseConfig({ listen: '127.0.0.1:0', log: { level }, ...config }, null), opts);
  t.after(() => proxy.close());
  return { proxy, uri: proxy.uri };
}
