// A stand-in OTLP/HTTP collector for the tracing demo: accepts JSON exports on
// http://127.0.0.1:4318/v1/traces (PORT=<n>: another port) and prints each trace as an indented
// tree once it is quiet for a second. For real use, point telemetry.otlp_endpoint at your
// collector (Jaeger, Tempo, the OpenTelemetry Collector) instead.
import { createServer } from 'node:http';

const spans = [];
let timer = null;
const val = (v) => v.stringValue ?? v.boolValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue);

function printTraces() {
  const byTrace = new Map();
  for (const s of spans.splice(0)) {
    if (!byTrace.has(s.traceId)) byTrace.set(s.traceId, []);
    byTrace.get(s.traceId).push(s);
  }
  for (const [traceId, list] of byTrace) {
    console.log(`trace ${traceId}`);
    const ids = new Set(list.map((s) => s.spanId));
    const print = (s, depth) => {
      const us = Number((BigInt(s.endTimeUnixNano) - BigInt(s.startTimeUnixNano)) / 1000n);
      const attrs = Object.fromEntries((s.attributes ?? []).map((a) => [a.key, val(a.value)]));
      const keep = ['proxy.step.phase', 'proxy.step.order', 'db.operation', 'db.upstream.collection', 'error.type'];
      const shown = keep.filter((k) => attrs[k] !== undefined).map((k) => `${k}=${attrs[k]}`).join(' ');
      console.log(`${'  '.repeat(depth + 1)}${s.name} [${s.service}] ${us} µs ${shown}`.trimEnd());
      for (const c of list.filter((x) => x.parentSpanId === s.spanId).sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1))) print(c, depth + 1);
    };
    for (const root of list.filter((s) => !s.parentSpanId || !ids.has(s.parentSpanId))) print(root, 0);
  }
}

createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    if (req.url === '/v1/traces' && String(req.headers['content-type']).includes('json')) {
      for (const rs of JSON.parse(body).resourceSpans ?? []) {
        const service = val((rs.resource?.attributes ?? []).find((a) => a.key === 'service.name')?.value ?? {});
        for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, service });
      }
      clearTimeout(timer);
      timer = setTimeout(printTraces, 1000);
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
}).listen(Number(process.env.PORT ?? 4318), '127.0.0.1', function () {
  console.log(`collector stand-in on http://127.0.0.1:${this.address().port}/v1/traces (OTLP/JSON)`);
});
