// The pools of routed upstreams (the URIs steps chose with proxy_set_route / ctx.setRoute) are
// capped at MAX_ROUTED_UPSTREAMS: a pool lives as long as the proxy, and a plugin that builds its
// route from request data opened one per distinct URI without end. Past the cap the request is
// answered with BadValue (a ProxyError: an error document to that client); the pools already open
// keep serving.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UpstreamPool, UpstreamRouter, MAX_ROUTED_UPSTREAMS, parseUpstreamUri, type PoolOptions } from '../../runtime/upstream/index.ts';
import { ProxyError } from '../../runtime/errors/index.ts';

const opts: PoolOptions = { poolSize: 1, minIdle: 0, maxIdleTimeMs: 60_000, connectTimeoutMs: 1000, waitQueueTimeoutMs: 1000 };
const log = { info() {}, warn() {} };

test(`a router opens pools for at most ${MAX_ROUTED_UPSTREAMS} routed upstreams; a further URI is a BadValue error, the open ones keep serving`, (t) => {
  assert.equal(MAX_ROUTED_UPSTREAMS, 256);
  const router = new UpstreamRouter(new UpstreamPool(parseUpstreamUri('mongodb://127.0.0.1:1'), opts, log), opts, log);
  t.after(() => { router.close(); router.main.close(); });
  const uri = (i: number) => `mongodb://127.0.0.${(i >> 8) + 2}:${1000 + (i & 0xff)}`;
  const pools = Array.from({ length: MAX_ROUTED_UPSTREAMS }, (_, i) => router.poolFor(uri(i)));
  assert.equal(new Set(pools).size, MAX_ROUTED_UPSTREAMS);
  assert.throws(() => router.poolFor(uri(MAX_ROUTED_UPSTREAMS)), (err: unknown) => {
    assert.ok(err instanceof ProxyError);
    assert.equal(err.codeName, 'BadValue');
    assert.match(err.message, /opens pools for at most 256 routed upstreams/);
    return true;
  });
  assert.equal([...router.routedPools].length, MAX_ROUTED_UPSTREAMS);
  assert.equal(router.poolFor(uri(7)), pools[7], 'an open one is still found');
  assert.equal(router.poolFor('mongodb://127.0.0.1:1'), router.main, 'the main upstream is no routed pool');
});
