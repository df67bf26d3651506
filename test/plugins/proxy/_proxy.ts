// Shared helper for the proxy-level built-in tests: a real proxy (embedded devdb upstream, started
// by startProxy itself) running a pipeline of built-in steps, a captured log sink, a recorder of
// the commands devdb actually receives, and small helpers around the prom-client registry.
import { MongoClient, type MongoClientOptions } from 'mongodb';
import type { Document } from 'bson';
import type { RunningProxy } from '../../../runtime/app/serve.ts';
import { Logger } from '../../../runtime/log/index.ts';
import type { Registry } from 'prom-client';
import { Closes, withProxy } from '../../helpers/proxy.ts';

export interface ProxyUnderTest {
  proxy: RunningProxy;
  /** Proxy connection string. */
  uri: string;
  /** Embedded devdb connection string (bypasses the proxy). */
  devdbUri: string;
  /** Parsed JSON log lines written by the proxy (and its plugins). */
  lines: Array<Record<string, unknown>>;
  /** Commands devdb executed (the body after the pipeline, document sequences not merged). */
  upstreamCommands: Document[];
  client(opts?: MongoClientOptions): Promise<MongoClient>;
  close(): Promise<void>;
}

export interface PipelineSpec {
  id: string;
  request?: string[];
  response?: string[];
  steps?: Record<string, unknown>;
  logLevel?: 'trace' | 'debug' | 'info' | 'warn' | 'error';
}

export async function startPipelineProxy(spec: PipelineSpec): Promise<ProxyUnderTest> {
  const lines: Array<Record<string, unknown>> = [];
  const log = new Logger('test', spec.logLevel ?? 'info', 'json', {
    write: (l: string) => { for (const s of l.split('\n')) if (s.trim() !== '') lines.push(JSON.parse(s)); },
  });
  const closes = new Closes();
  const { proxy } = await withProxy(closes, {
    log: { level: 'info' },
    pipeline: { id: spec.id, request: spec.request ?? [], response: spec.response ?? [] },
    steps: spec.steps ?? {},
  }, { log });
  hostRegistries.set(spec.id, proxy.pipelines.host.registry);
  const devdb = proxy.devdb!;
  const upstreamCommands: Document[] = [];
  const engine = devdb.engine as unknown as { run: (cmd: Document, ...rest: unknown[]) => Document };
  const orig = engine.run.bind(engine);
  engine.run = (cmd: Document, ...rest: unknown[]) => { upstreamCommands.push(cmd); return orig(cmd, ...rest); };
  // startProxy logs the embedded devdb's address when it starts one.
  const started = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('no upstream.uri configured'));
  const devdbUri = String(started?.upstream);
  const clients: MongoClient[] = [];
  return {
    proxy, uri: proxy.uri, devdbUri, lines, upstreamCommands,
    async client(opts: MongoClientOptions = {}) {
      const c = new MongoClient(proxy.uri, { directConnection: true, serverSelectionTimeoutMS: 5000, ...opts });
      clients.push(c);
      await c.connect();
      return c;
    },
    async close() {
      for (const c of clients) await c.close(true).catch(() => {});
      await closes.run();
    },
  };
}

/** The plugin-host registry of the proxy started for each pipeline id (each test uses its own id). */
const hostRegistries = new Map<string, Registry>();

/** Sum of the samples of a metric (all label sets of pipeline id `pipeline`) in that proxy's plugin host. 0 when absent. */
export async function metricValue(name: string, pipeline: string, extra = ''): Promise<number> {
  const registry = hostRegistries.get(pipeline);
  if (registry === undefined) return 0;
  const text = await registry.metrics();
  let sum = 0;
  const re = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm');
  for (const m of text.matchAll(re)) {
    if (!m[1].includes(`pipeline_id="${pipeline}"`)) continue;
    if (extra !== '' && !m[1].includes(extra)) continue;
    sum += Number(m[2]);
  }
  return sum;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Test documents have numeric _ids (the driver's default schema types _id as ObjectId). */
export type Doc = { _id?: number; [k: string]: any };
