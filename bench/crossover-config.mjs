// Prints the configuration ../shared/bench/crossover.sh runs (the eight built-ins, a 16 MiB cache, a
// stub upstream) with a JSON fragment deep-merged into it, for runs of one proxy (perf-split.sh).
// Usage: node bench/crossover-config.mjs <listen port> <stub port> ['<fragment JSON>']
const [port, stub, fragment] = process.argv.slice(2);
const base = {
  listen: `127.0.0.1:${port}`, upstream: { uri: `mongodb://127.0.0.1:${stub}` }, log: { level: 'warn' },
  pipeline: { request: ['rate_limit', 'auth', 'filter', 'route', 'transform', 'cache'], response: ['cache', 'transform', 'metrics', 'logging'] },
  steps: {
    logging: { config: { sample_rate: 0.1 } }, metrics: { config: {} }, rate_limit: { config: { max_rps: 10000000 } },
    auth: { config: { provider: 'static', dbs: { '*': 'readWrite' } } },
    filter: { config: { default: 'allow', rules: [{ name: 'no-admin-writes', action: 'deny', ops: ['insert', 'update', 'delete'], dbs: ['admin'] }] } },
    route: { config: { rules: [{ dbs: ['archive'], upstream: `mongodb://127.0.0.1:${stub}` }] } },
    transform: { config: { response: [{ op: 'redact', path: 'ssn', replacement: '***' }] } },
    cache: { kv_max_bytes: 16777216, config: { ttl_ms: 60000, max_bytes: 16777216 } },
  },
};
const merge = (a, b) => {
  for (const k of Object.keys(b)) {
    if (b[k] && typeof b[k] === 'object' && !Array.isArray(b[k]) && a[k] && typeof a[k] === 'object') merge(a[k], b[k]);
    else a[k] = b[k];
  }
  return a;
};
console.log(JSON.stringify(merge(base, JSON.parse(fragment ?? '{}')), null, 1));
