// The per-request profile (runtime/server/request-profile.ts) reaches only the client that asked:
// while a driver client with `proxy_profile=true` in its appName runs requests through a profiling
// proxy, a raw wire client without that flag gets replies whose bytes after the header (flag bits
// and sections) are exactly the upstream's — compared with the same requests sent straight to the
// upstream and through a proxy without profiling.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { Logger } from '../../runtime/log/index.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const running = new Closes();
const clients: MongoClient[] = [];
const raws: RawClient[] = [];
let devdb: DevDbServer | null = null;
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  for (const r of raws) r.destroy();
  await running.run().catch(() => {});
  await devdb?.close();
});

const quiet = () => new Logger('test', 'error', 'json', { write: () => {} });

async function proxyTo(uri: string, profiling: Record<string, unknown> | undefined): Promise<RunningProxy> {
  const raw: Record<string, unknown> = {
    upstream: { uri },
    pipeline: { request: ['filter'], response: ['logging'] },
    steps: { filter: { config: { rules: [], default: 'allow' } }, logging: { config: { sample_rate: 0 } } },
  };
  if (profiling !== undefined) raw.profiling = { port: 0, ...profiling };
  const { proxy } = await withProxy(running, raw, { log: quiet() });
  return proxy;
}

async function raw(port: number): Promise<RawClient> {
  const c = await RawClient.connect(port);
  raws.push(c);
  await c.hello(); // no client metadata, so no appName: not a profiling client
  return c;
}

test('with a proxy_profile=true client active, another client\'s replies are byte-identical to the upstream\'s', { timeout: 60_000 }, async () => {
  devdb = new DevDbServer();
  const { uri, port: upstreamPort } = await devdb.listen();
  const seed = new MongoClient(uri);
  clients.push(seed);
  await seed.db('shop').collection<{ _id: number }>('orders').insertMany(Array.from({ length: 20 },
    (_, i) => ({ _id: i, sku: `s${i % 4}`, qty: i, tags: ['a', 'b'], nested: { z: 1, a: 2 } })));

  const profiling = await proxyTo(uri, { enabled: true, slow_step_threshold_us: 1_000_000 });
  const plain = await proxyTo(uri, undefined);

  // The profiling client keeps running requests through the same proxy meanwhile.
  const pc = new MongoClient(profiling.uri, { appName: 'reporting?proxy_profile=true', serverSelectionTimeoutMS: 5000 });
  clients.push(pc);
  const first = await pc.db('shop').command({ find: 'orders', filter: { qty: { $lt: 3 } } });
  assert.ok(first.proxy_profile !== undefined, 'the profiling client does get proxy_profile');
  let stop = false;
  let profiled = 0;
  const background = (async () => {
    while (!stop) {
      const r = await pc.db('shop').command({ find: 'orders', filter: {} });
      assert.ok(r.proxy_profile !== undefined);
      profiled++;
    }
  })();

  const direct = await raw(upstreamPort);
  const viaProfiling = await raw(profiling.port);
  const viaPlain = await raw(plain.port);
  const requests = [
    { find: 'orders', filter: { qty: { $gte: 5 } }, sort: { _id: 1 }, $db: 'shop' },
    { find: 'orders', filter: { sku: 's1' }, projection: { nested: 1, tags: 1 }, $db: 'shop' },
    { aggregate: 'orders', pipeline: [{ $group: { _id: '$sku', n: { $sum: 1 } } }, { $sort: { _id: 1 } }], cursor: {}, $db: 'shop' },
    { count: 'orders', query: { qty: { $lt: 10 } }, $db: 'shop' },
    { find: 'missing', filter: {}, $db: 'shop' },
    { nosuchcommand: 1, $db: 'shop' },
  ];
  for (const body of requests) {
    const upstream = (await direct.roundTrip(opMsg(body))).frame.raw.subarray(16);
    const a = (await viaProfiling.roundTrip(opMsg(body))).frame.raw.subarray(16);
    const b = (await viaPlain.roundTrip(opMsg(body))).frame.raw.subarray(16);
    const what = Object.keys(body)[0];
    assert.ok(upstream.equals(b), `${what}: the proxy without profiling forwards the upstream's bytes`);
    assert.ok(upstream.equals(a), `${what}: the profiling proxy forwards the upstream's bytes to a client that did not ask for a profile`);
    assert.ok(!a.includes(Buffer.from('proxy_profile')), `${what}: no proxy_profile field`);
  }
  stop = true;
  await background;
  assert.ok(profiled > 0, 'the profiling client ran requests meanwhile');
  // Profiled (recorded) all the same, just not annotated: the profiling client's requests and the raw client's.
  assert.equal((await (await fetch(`${profiling.profilingUrl}/api/profile`)).json()).total_requests, 1 + profiled + requests.length);
});
