// OTLP trace export of sampled requests (SPEC §2.3, §2.4; docs/tracing.md).
//
// The decision is made when a request starts, by sample(): parent-based — a client's traceparent
// decides by its sampled flag — else one Math.random() against sample_rate. An unsampled request
// then costs that call and nothing else: its steps run the untimed loop (unless profiling times
// them anyway) and no span object is ever made for it. A sampled request gathers its step timings
// in the connection's RequestTimings like a profiled one, and when it ends record() builds its spans
// from the recorded times (explicit start and end), so no span is open while the request runs.
//
// The SDK sampler is ParentBased(AlwaysOn): the decision was already taken here, and the SDK only
// has to keep it (an unsampled remote parent never reaches it). Spans leave through a bounded queue
// (span-queue.ts); a down or slow collector costs dropped spans, counted, never request time.
import { performance } from 'node:perf_hooks';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type HrTime, type Span, type Tracer } from '@opentelemetry/api';
import { NodeTracerProvider, ParentBasedSampler, AlwaysOnSampler, type SpanExporter } from '@opentelemetry/sdk-trace-node';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { RequestTimings } from '../pipeline/index.ts';
import { BoundedSpanQueue, type SpanQueueLog } from './span-queue.ts';
import { TraceContextReader, parseTraceparent, type TraceParent } from './traceparent.ts';

export interface TracingSettings {
  /** The collector's traces URL (with /v1/traces). */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  serviceName: string;
  sampleRate: number;
  resourceAttributes: Readonly<Record<string, string>>;
  maxQueueSpans: number;
  maxBatchSpans: number;
  exportIntervalMs: number;
  exportTimeoutMs: number;
}

export interface TracingLog extends SpanQueueLog {
  debug(msg: string, fields?: Record<string, unknown>): void;
}

/** What the connection hands over when a sampled request ends. Times are performance.now() ms. */
export interface TracedRequest {
  parent: TraceParent | null;
  pipelineId: string;
  /** baseline or candidate */
  variant: string;
  op: string;
  db: string;
  collection: string;
  readAt: number;
  endAt: number;
  /** When the request phase started (-1: none ran). */
  requestPhaseAt: number;
  /** When the response phase started (-1: none ran). */
  responsePhaseAt: number;
  /** The upstream call's stages (startedAt 0: the request did not go upstream). */
  upstreamStartedAt: number;
  upstreamAcquiredAt: number;
  upstreamWrittenAt: number;
  upstreamRepliedAt: number;
  /** "host:port" of the upstream that served it ('' when none). */
  upstream: string;
  ok: boolean;
  /** The error's code and code name when !ok (0 / '' when unknown). */
  errorCode: number;
  errorName: string;
  timings: RequestTimings;
}

/** The OTLP traces URL for `endpoint`: /v1/traces appended when it has no path. */
export function tracesUrl(endpoint: string): string {
  const u = new URL(endpoint);
  if (u.pathname === '/' || u.pathname === '') u.pathname = '/v1/traces';
  return u.toString();
}

export class Tracing {
  readonly settings: TracingSettings;
  readonly queue: BoundedSpanQueue;
  /** Requests sampled, and traceparents refused as invalid (for /metrics). */
  sampled = 0;
  invalidTraceparents = 0;
  private readonly provider: NodeTracerProvider;
  private readonly tracer: Tracer;
  private readonly log: TracingLog;
  private readonly reader = new TraceContextReader();
  private readonly origin = performance.timeOrigin;

  constructor(settings: TracingSettings, log: TracingLog, exporter?: SpanExporter) {
    this.settings = settings;
    this.log = log;
    const exp = exporter ?? (settings.protocol === 'http/json'
      ? new JsonExporter({ url: settings.url, timeoutMillis: settings.exportTimeoutMs })
      : new ProtoExporter({ url: settings.url, timeoutMillis: settings.exportTimeoutMs }));
    this.queue = new BoundedSpanQueue(exp, {
      maxQueue: settings.maxQueueSpans, maxBatch: settings.maxBatchSpans, intervalMs: settings.exportIntervalMs,
    }, log);
    this.provider = new NodeTracerProvider({
      resource: resourceFromAttributes({ ...settings.resourceAttributes, 'service.name': settings.serviceName }),
      sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
      spanProcessors: [this.queue],
    });
    this.tracer = this.provider.getTracer('pipeline-proxy');
  }

  /**
   * The client's trace context in the command `body` (`$traceparent`, else `comment`), or null.
   * Called only when the command has one of those fields. An invalid value is ignored (debug log).
   */
  parent(body: Buffer, traceparentAt: number, commentAt: number, conn: number): TraceParent | null {
    const r = this.reader;
    if (!r.read(body, traceparentAt, commentAt)) return null;
    const p = parseTraceparent(r.text);
    if (typeof p === 'string') {
      // A comment that is not a trace context is just a comment.
      if (r.source === 'comment' && !r.text.includes('-')) return null;
      this.invalidTraceparents++;
      this.log.debug('invalid traceparent ignored', { conn, source: r.source, reason: p, value: r.text.slice(0, 80) });
      return null;
    }
    return p;
  }

  /** Parent-based ratio sampling; called once per request at its start. */
  sample(parent: TraceParent | null): boolean {
    const rate = this.settings.sampleRate;
    const yes = parent !== null ? parent.sampled : rate >= 1 || (rate > 0 && Math.random() < rate);
    if (yes) this.sampled++;
    return yes;
  }

  private time(ms: number): HrTime {
    const t = this.origin + ms;
    const s = Math.floor(t / 1000);
    return [s, Math.round((t - s * 1000) * 1e6)];
  }

  /** Builds and ends the spans of a sampled request (SPEC §2.4) from its recorded times. */
  record(r: TracedRequest): void {
    const tracer = this.tracer;
    const a = new SpanAttrs(r);
    const parentCtx = r.parent === null ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, {
      traceId: r.parent.traceId, spanId: r.parent.spanId, traceFlags: r.parent.flags, isRemote: true,
    });
    const rootAttrs = a.db();
    rootAttrs['proxy.request.duration_us'] = Math.round((r.endAt - r.readAt) * 1000);
    if (!r.ok) addError(rootAttrs, r);
    const root = tracer.startSpan('proxy.request', { kind: SpanKind.SERVER, startTime: this.time(r.readAt), attributes: rootAttrs }, parentCtx);
    if (!r.ok) root.setStatus({ code: SpanStatusCode.ERROR, message: r.errorName || String(r.errorCode) });
    const ctx = trace.setSpan(ROOT_CONTEXT, root);

    // Steps run back to back within a phase (the timed loop), so each starts where the one before
    // ended; their durations are the measured ones.
    const t = r.timings;
    let phase = -1;
    let at = 0;
    let order = 0;
    let sub = 0;
    for (let i = 0; i < t.count; i++) {
      const timer = t.timers[i];
      if (timer.phase !== phase) {
        phase = timer.phase;
        at = phase === 0 ? r.requestPhaseAt : r.responsePhaseAt;
        order = 0;
      }
      order++;
      const ns = t.ns[i];
      const end = at + ns / 1e6;
      const name = timer.step.startsWith('wasm:') ? timer.step.slice(5) : timer.step;
      const span = tracer.startSpan(`proxy.step.${name}`, {
        kind: SpanKind.INTERNAL, startTime: this.time(at),
        attributes: a.step(timer.step, phase === 0 ? 'request' : 'response', Math.round(ns / 1000), t.errors[i], order),
      }, ctx);
      if (t.errors[i]) span.setStatus({ code: SpanStatusCode.ERROR });
      // Sub-operations: their durations are measured; laid out in order from the step's start.
      let subAt = at;
      while (sub < t.subCount && t.subOf[sub] <= i) {
        if (t.subOf[sub] === i) {
          const subEnd = Math.min(end, subAt + t.subNs[sub] / 1e6);
          this.child(trace.setSpan(ROOT_CONTEXT, span), t.subNames[sub], subAt, subEnd, { 'proxy.step.name': timer.step, 'proxy.subop.duration_us': Math.round(t.subNs[sub] / 1000) });
          subAt = subEnd;
        }
        sub++;
      }
      span.end(this.time(end));
      at = end;
    }

    if (r.upstreamStartedAt > 0) {
      const upEnd = r.upstreamRepliedAt > 0 ? r.upstreamRepliedAt : r.endAt;
      const up = tracer.startSpan('proxy.upstream', { kind: SpanKind.INTERNAL, startTime: this.time(r.upstreamStartedAt), attributes: a.db() }, ctx);
      const upCtx = trace.setSpan(ROOT_CONTEXT, up);
      const acquired = r.upstreamAcquiredAt > 0 ? r.upstreamAcquiredAt : upEnd;
      this.child(upCtx, 'connection.acquire', r.upstreamStartedAt, acquired, a.db());
      if (r.upstreamWrittenAt > 0) {
        const opAttrs = a.db();
        if (!r.ok) addError(opAttrs, r);
        // The operation span is named as the database conventions name a client span: "{operation} {collection}".
        const op = tracer.startSpan(r.collection === '' ? r.op : `${r.op} ${r.collection}`,
          { kind: SpanKind.CLIENT, startTime: this.time(r.upstreamWrittenAt), attributes: opAttrs }, upCtx);
        if (!r.ok) op.setStatus({ code: SpanStatusCode.ERROR });
        op.end(this.time(upEnd));
      }
      up.end(this.time(upEnd));
    }
    root.end(this.time(r.endAt));
  }

  private child(ctx: Context, name: string, start: number, end: number, attributes: Attributes): Span {
    const s = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime: this.time(start), attributes }, ctx);
    s.end(this.time(end));
    return s;
  }

  /** Exports what is queued. */
  flush(): Promise<void> {
    return this.queue.forceFlush();
  }

  /**
   * Exports what is queued — waiting at most export_timeout_ms — and stops; spans recorded later,
   * or still queued at the deadline, are dropped (and counted).
   */
  async close(): Promise<void> {
    await this.queue.shutdown(this.settings.exportTimeoutMs);
  }
}

/**
 * The attributes of one request's spans, each set a fresh object literal of one shape (no spreads:
 * they cost more than the span). The SPEC's names (the contract) and the stable OpenTelemetry
 * database names beside them (semantic conventions 1.33+). An undefined value (no collection, no
 * upstream) is left out by the SDK.
 */
class SpanAttrs {
  private readonly op: string;
  private readonly dbName: string;
  private readonly coll: string | undefined;
  private readonly host: string | undefined;
  private readonly port: number | undefined;
  private readonly pipelineId: string;
  private readonly variant: string;

  constructor(r: TracedRequest) {
    this.op = r.op;
    this.dbName = r.db;
    this.coll = r.collection === '' ? undefined : r.collection;
    this.pipelineId = r.pipelineId;
    this.variant = r.variant;
    if (r.upstream !== '') {
      const i = r.upstream.lastIndexOf(':');
      this.host = r.upstream.slice(0, i);
      this.port = Number(r.upstream.slice(i + 1));
    }
  }

  /** The database attributes every span of the request carries. */
  db(): Attributes {
    return {
      'db.system': 'mongodb', 'db.operation': this.op, 'db.upstream.collection': this.coll,
      'net.peer.name': this.host, 'net.peer.port': this.port,
      'db.system.name': 'mongodb', 'db.operation.name': this.op, 'db.collection.name': this.coll, 'db.namespace': this.dbName,
      'server.address': this.host, 'server.port': this.port,
      'proxy.pipeline.id': this.pipelineId, 'proxy.pipeline': this.variant,
    };
  }

  step(name: string, phase: string, durationUs: number, error: boolean, order: number): Attributes {
    return {
      'proxy.step.name': name, 'proxy.step.phase': phase, 'proxy.step.duration_us': durationUs,
      'proxy.step.error': error, 'proxy.step.order': order,
      'db.system': 'mongodb', 'db.operation': this.op, 'db.upstream.collection': this.coll,
      'net.peer.name': this.host, 'net.peer.port': this.port,
      'db.system.name': 'mongodb', 'db.operation.name': this.op, 'db.collection.name': this.coll, 'db.namespace': this.dbName,
      'server.address': this.host, 'server.port': this.port,
      'proxy.pipeline.id': this.pipelineId, 'proxy.pipeline': this.variant,
    };
  }
}

function addError(attrs: Attributes, r: TracedRequest): void {
  if (r.errorCode !== 0) attrs['db.response.status_code'] = String(r.errorCode);
  attrs['error.type'] = r.errorName !== '' ? r.errorName : r.errorCode !== 0 ? String(r.errorCode) : 'error';
}
