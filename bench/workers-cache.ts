// The cache step's hit rate with 1 worker and with N, under the same traffic: the cache is per
// worker (each worker's plugin store), so N workers warm N caches. Per worker count: `proxy serve
// --workers N` (the cache step alone, in front of the embedded development upstream), then
// --connections raw connections send --requests finds in total over --keys distinct filter values
// (uniformly at random, the same seeded sequence for every N); the hit rate is read from the
// machine's /metrics (proxy_plugin_cache_hits_total / (hits + misses), summed over the workers).
//
// Usage: node --import tsx bench/workers-cache.ts [--workers 1,2,4] [--keys 1000] [--requests 20000] [--connections 16]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { arg, freePort, startChild, stopChildren } from './lib.ts';
import { RawClient, opMsg } from '../test/helpers/wire.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const counts = arg('--workers', '1,2,4').split(',').map(Number);
const keys = Number(arg('--keys', '1000'));
const requests = Number(arg('--requests', '20000'));
const connections = Number(arg('--connections', '16'));

/** The sum of every series of `name`. */
function metric(text: string, name: string): number {
  let n = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) n += Number(m[1]);
  return n;
}

const rows: Array<{ workers: number; hits: number; misses: number; hit_rate: number }> = [];
try {
  for (const workers of counts) {
    const dir = mkdtempSync(join(tmpdir(), 'workers-cache-'));
    const [port, profPort] = [await freePort(), await freePort()];
    writeFileSync(join(dir, 'proxy.json'), JSON.stringify({
      listen: `127.0.0.1:${port}`, log: { level: 'warn' }, profiling: { enabled: true, port: profPort, alert_on_slow_step: false },
      pipeline: { request: ['cache'], response: ['cache'] }, steps: { cache: { config: { ttl_ms: 600_000, max_bytes: 64 * 1024 * 1024 } } },
    }));
    await startChild('proxy', process.execPath, [join(ROOT, 'bin/proxy.mjs'), 'serve', '--config', join(dir, 'proxy.json'), '--workers',
      String(workers)], port, ROOT, join(dir, 'proxy.log'), 120_000);
    // Every worker up before the load (the port accepts once the first one listens).
    await new Promise((r) => setTimeout(r, 2000 + 1000 * workers));
    let seed = 12345;
    // The generator's high bits (its low bits repeat with a short period).
    const next = () => Math.floor(((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * keys);
    const sequence = Array.from({ length: requests }, next);
    const clients = await Promise.all(Array.from({ length: connections }, () => RawClient.connect(port)));
    let i = 0;
    await Promise.all(clients.map(async (c) => {
      while (i < sequence.length) {
        const k = sequence[i++];
        await c.roundTrip(opMsg({ find: 'items', filter: { k }, $db: 'cachebench' }), 30_000);
      }
      c.destroy();
    }));
    const text = await (await fetch(`http://127.0.0.1:${profPort}/metrics`)).text();
    const hits = metric(text, 'proxy_plugin_cache_hits_total');
    const misses = metric(text, 'proxy_plugin_cache_misses_total');
    const row = { workers, hits, misses, hit_rate: +(hits / Math.max(1, hits + misses)).toFixed(4) };
    rows.push(row);
    console.log(JSON.stringify(row));
    stopChildren();
    rmSync(dir, { recursive: true, force: true });
  }
} finally {
  stopChildren();
}
console.log(`\n${keys} keys, ${requests} requests over ${connections} connections\n| workers | hits | misses | hit rate |\n|---|---|---|---|`);
for (const r of rows) console.log(`| ${r.workers} | ${r.hits} | ${r.misses} | ${r.hit_rate} |`);
