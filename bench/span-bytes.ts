// Bytes on the wire per span and per sampled request (docs/tracing.md, "Sampling"): a real proxy in
// this process with the eight built-ins as bench/crossover-config.mjs sets them up (a 16 MiB cache,
// every request a miss and a store), in front of the embedded development upstream, every request
// traced with the default http/protobuf export to a local HTTP server that counts the bytes of each
// export request and the size of every span in it. Two runs: OTEL_SEMCONV_STABILITY_OPT_IN unset,
// then at `database/dup` (set here before each proxy starts: the variable is read when tracing
// starts). What is counted is bytes, not time: the figures do not depend on the machine's load.
//
// Usage: node --import tsx bench/span-bytes.ts [--requests 200]
import { createServer, type Server } from 'node:http';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../runtime/config/index.ts';
import { startProxy } from '../runtime/app/serve.ts';
import { DevDbServer } from '../runtime/devdb/index.ts';
import { arg } from './lib.ts';

const REQUESTS = Number(arg('--requests', '200'));

/** A protobuf varint at `p`: its value and the position after it. */
function varint(b: Buffer, p: number): [number, number] {
  let v = 0;
  let mul = 1;
  for (;;) {
    const x = b[p++];
    v += (x & 0x7f) * mul;
    if ((x & 0x80) === 0) return [v, p];
    mul *= 128;
  }
}

/** The length-delimited fields `field` of the message in b[from, to): their [start, end). */
function fields(b: Buffer, from: number, to: number, field: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let p = from;
  while (p < to) {
    const [key, q] = varint(b, p);
    const wire = key & 7;
    p = q;
    if (wire === 0) p = varint(b, p)[1];
    else if (wire === 1) p += 8;
    else if (wire === 5) p += 4;
    else if (wire === 2) {
      const [len, s] = varint(b, p);
      if (key >>> 3 === field) out.push([s, s + len]);
      p = s + len;
    } else throw new Error(`wire type ${wire}`);
  }
  return out;
}

/** Per span of an ExportTraceServiceRequest: its name and its encoded size (ScopeSpans.spans entry, tag and length included). */
function spanSizes(body: Buffer): Array<{ name: string; bytes: number }> {
  const out: Array<{ name: string; bytes: number }> = [];
  for (const [rs, re] of fields(body, 0, body.length, 1)) {
    for (const [ss, se] of fields(body, rs, re, 2)) {
      for (const [s, e] of fields(body, ss, se, 2)) {
        const [ns, ne] = fields(body, s, e, 5)[0];
        // The entry's tag (1 byte) and its length varint.
        let lenBytes = 1;
        for (let v = e - s; v >= 0x80; v = Math.floor(v / 128)) lenBytes++;
        out.push({ name: body.toString('utf8', ns, ne), bytes: e - s + 1 + lenBytes });
      }
    }
  }
  return out;
}

interface Tally { bodies: number; bodyBytes: number; spans: Array<{ name: string; bytes: number }> }

function collector(tally: Tally): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      tally.bodies++;
      tally.bodyBytes += body.length;
      tally.spans.push(...spanSizes(body));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server })));
}

/** The kind of span, for the table: steps and sub-operations grouped. */
function kindOf(name: string): string {
  if (name.startsWith('proxy.step.')) return 'step';
  if (name === 'proxy.request' || name === 'proxy.upstream' || name === 'connection.acquire') return name;
  if (name.startsWith('find ')) return 'operation (find …)';
  return 'sub-operation';
}

async function run(optIn: string | undefined): Promise<void> {
  if (optIn === undefined) delete process.env.OTEL_SEMCONV_STABILITY_OPT_IN;
  else process.env.OTEL_SEMCONV_STABILITY_OPT_IN = optIn;
  const devdb = new DevDbServer();
  const up = await devdb.listen(0);
  const tally: Tally = { bodies: 0, bodyBytes: 0, spans: [] };
  const c = await collector(tally);
  const proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', workers: 1, log: { level: 'error' }, upstream: { uri: up.uri },
    pipeline: { request: ['rate_limit', 'auth', 'filter', 'route', 'transform', 'cache'], response: ['cache', 'transform', 'metrics', 'logging'] },
    steps: {
      logging: { config: { sample_rate: 0.1 } }, metrics: { config: {} }, rate_limit: { config: { max_rps: 10000000 } },
      auth: { config: { provider: 'static', dbs: { '*': 'readWrite' } } },
      filter: { config: { default: 'allow', rules: [{ name: 'no-admin-writes', action: 'deny', ops: ['insert', 'update', 'delete'], dbs: ['admin'] }] } },
      route: { config: { rules: [{ dbs: ['archive'], upstream: up.uri }] } },
      transform: { config: { response: [{ op: 'redact', path: 'ssn', replacement: '***' }] } },
      cache: { config: { ttl_ms: 60000, max_bytes: 16777216 } },
    },
    telemetry: { otlp_endpoint: c.url, sample_rate: 0, service_name: 'proxy' },
  }, null));
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  try {
    const coll = client.db('app').collection('users');
    await coll.findOne({ warm: 1 });
    proxy.tracing!.setSampleRate(1);
    // A distinct filter per request: every one a cache miss and a store, as in the crossover runs.
    for (let i = 0; i < REQUESTS; i++) await coll.findOne({ k: i });
    await proxy.tracing!.flush();
  } finally {
    await client.close(true);
    await proxy.close();
    await new Promise((r) => c.server.close(r));
    await devdb.close();
  }
  const roots = tally.spans.filter((s) => s.name === 'proxy.request').length;
  const spanBytes = tally.spans.reduce((n, s) => n + s.bytes, 0);
  console.log(`OTEL_SEMCONV_STABILITY_OPT_IN ${optIn === undefined ? 'unset' : `=${optIn}`}: ${roots} sampled requests, ` +
    `${tally.spans.length} spans in ${tally.bodies} export requests`);
  console.log(`  per sampled request: ${(tally.bodyBytes / roots).toFixed(0)} bytes sent (export bodies), ` +
    `${(tally.spans.length / roots).toFixed(1)} spans of ${(spanBytes / tally.spans.length).toFixed(0)} bytes on average`);
  const kinds = new Map<string, { n: number; bytes: number }>();
  for (const s of tally.spans) {
    const k = kinds.get(kindOf(s.name)) ?? { n: 0, bytes: 0 };
    k.n++;
    k.bytes += s.bytes;
    kinds.set(kindOf(s.name), k);
  }
  for (const [k, v] of kinds) {
    console.log(`  ${k.padEnd(20)} ${(v.n / roots).toFixed(1).padStart(5)} per request, ${(v.bytes / v.n).toFixed(0).padStart(4)} bytes each`);
  }
}

await run(undefined);
await run('database/dup');
