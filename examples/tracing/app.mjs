// An application span linked to the proxy's spans (docs/tracing.md): the app starts a span, puts
// its W3C traceparent in the command — as the `comment` of a find, or as the `$traceparent`
// field of a raw command — and the proxy continues that trace: its `proxy.request` span becomes a
// child of the app's span. The app exports its own spans to the same collector.
import { MongoClient } from 'mongodb';
import { trace } from '@opentelemetry/api';
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'shop-app' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: process.env.OTLP_URL ?? 'http://127.0.0.1:4318/v1/traces' }))],
});
provider.register();
const tracer = trace.getTracer('shop-app');

/** The W3C traceparent of `span`: 00-<trace id>-<span id>-<flags>. */
function traceparent(span) {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-${c.traceFlags.toString(16).padStart(2, '0')}`;
}

const client = new MongoClient(process.env.PROXY_URI ?? 'mongodb://127.0.0.1:27018/');
const orders = client.db('shop').collection('orders');
await tracer.startActiveSpan('checkout', async (span) => {
  // CRUD helpers: the traceparent as the command's comment (forwarded to the upstream unchanged).
  await orders.insertOne({ item: 'book', status: 'open' }, { comment: traceparent(span) });
  const open = await orders.find({ status: 'open' }, { comment: traceparent(span) }).toArray();
  // A raw command: the $traceparent field (the proxy removes it before any step or the upstream).
  await client.db('shop').command({ count: 'orders', query: { status: 'open' }, $traceparent: traceparent(span) });
  console.log(`trace ${span.spanContext().traceId}: ${open.length} open order(s)`);
  span.end();
});
await client.close();
await provider.shutdown();
