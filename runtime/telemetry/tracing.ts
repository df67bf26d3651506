// OTLP trace export of sampled requests (SPEC §2.3, §2.4; docs/tracing.md).
//
// The decision is made when a request starts, by sample(): parent-based — a client's traceparent
// decides by its sampled flag — else one Math.random() against sample_rate. An unsampled request
// then costs that call and nothing else: its steps run the untimed loop (unless profiling times
// them anyway) and no span object is ever made for it. A sampled request gathers its step timings
// in the connection's RequestTimings like a profiled one, and when it ends record() builds its spans
// from the recorded times (explicit start and end), so no span is open while the request runs.
// On the http/protobuf path record() only copies what the spans need into a pending store
// (pending-traces.ts) and counts them against the queue's bound; their spans are written later, in
// one pass over every pending request (SpanBatch below: when the export runs, when a batch's worth
// is pending, at flush and shutdown), where the writer's code and data are warm.
//
// Spans are not made through the SDK's tracer: a traced request's spans are known whole when it
// ends. With http/protobuf they are written straight as OTLP protobuf (span-writer.ts, byte for
// byte the SDK serializer's output) and sent by the SDK's HTTP transport in a thread of its own (export-thread.ts); with
// http/json record() builds finished span records (RecordedSpan, the SDK's ReadableSpan shape)
// for the SDK's exporter. Both go through a bounded queue (span-queue.ts). Going through
// tracer.startSpan/end cost ~60 µs per request of 12 spans (context objects, attribute
// sanitising, clock reads the explicit times make useless). A down or slow collector costs
// dropped spans, counted, never request time.
import type { Log } from '../log/index.ts';
import { performance } from 'node:perf_hooks';
import { SpanKind, SpanStatusCode, type Attributes, type HrTime, type SpanContext, type SpanStatus } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { RequestTimings, Variant } from '../pipeline/index.ts';
import { phaseName } from '../wasm/index.ts';
import { knownCodeName } from '../errors/index.ts';
import { BoundedSpanQueue, EncodedSpanQueue, type EncodedSpanExporter, type ExportQueue, type PendingSpanSource } from './span-queue.ts';
import { PendingTraces } from './pending-traces.ts';
import { BatchEnvelope, SpanWriter } from './span-writer.ts';
import { IdSource } from './ids.ts';
import { StepLayout } from './step-layout.ts';
import { ThreadedTraceExporter } from './export-thread.ts';
import { TraceContextReader, parseTraceparent, type TraceParent } from './traceparent.ts';
import { SEMCONV_OPT_IN_ENV, stableDatabaseNames } from './semconv.ts';

export interface TracingSettings {
  /** The collector's traces URL (with /v1/traces). */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  serviceName: string;
  /** Applies on reload (Tracing.setSampleRate); the other settings need a restart. */
  sampleRate: number;
  resourceAttributes: Readonly<Record<string, string>>;
  maxQueueSpans: number;
  maxBatchSpans: number;
  exportIntervalMs: number;
  exportTimeoutMs: number;
  /**
   * An OTEL_SEMCONV_STABILITY_OPT_IN list (`database/dup`: the stable database names as well;
   * semconv.ts). Absent: the environment variable's value, read when the Tracing is made.
   */
  semconvStabilityOptIn?: string;
}

/** What the connection hands over when a sampled request ends. Times are performance.now() ms. */
export interface TracedRequest {
  parent: TraceParent | null;
  pipelineId: string;
  /** Its graph's variant (the span attribute `proxy.pipeline`). */
  variant: Variant;
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
  /** The reply's `ok` (false also for a rejection or a proxy error). */
  ok: boolean;
  /**
   * The error the client got (0 / '' when none or unknown). A code with `ok` true is a write reply
   * `ok: 1` reporting writeErrors or a writeConcernError: the request failed all the same.
   */
  errorCode: number;
  errorName: string;
  /** The upstream's reply as the connection read it (ReplyPeek); read only when upstreamRepliedAt > 0. */
  reply: UpstreamReply;
  timings: RequestTimings;
}

/** The failure an upstream reply reports (runtime/wire ReplyPeek). */
export interface UpstreamReply {
  readonly failed: boolean;
  readonly errorCode: number;
  readonly errorName: string;
}

/** The OTLP traces URL for `endpoint`: /v1/traces appended when it has no path. */
export function tracesUrl(endpoint: string): string {
  const u = new URL(endpoint);
  if (u.pathname === '/' || u.pathname === '') u.pathname = '/v1/traces';
  return u.toString();
}

/** The instrumentation scope every span is exported under. */
const SCOPE = { name: 'pipeline-proxy' } as const;
const NO_LINKS: never[] = [];
const NO_EVENTS: never[] = [];
const STATUS_UNSET: SpanStatus = { code: SpanStatusCode.UNSET };
const STATUS_ERROR: SpanStatus = { code: SpanStatusCode.ERROR };

/**
 * One finished span, in the shape the SDK's exporters read (ReadableSpan). Built whole by
 * Tracing.record(): nothing on it changes after, and nothing is ever "open".
 */
class RecordedSpan implements ReadableSpan {
  readonly name: string;
  readonly kind: SpanKind;
  readonly parentSpanContext: SpanContext | undefined;
  readonly startTime: HrTime;
  readonly endTime: HrTime;
  readonly status: SpanStatus;
  readonly attributes: Attributes;
  readonly resource: Resource;
  readonly links = NO_LINKS;
  readonly events = NO_EVENTS;
  readonly ended = true;
  readonly instrumentationScope = SCOPE;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  /** Also this span's context, as its children's parentSpanContext. */
  readonly context: SpanContext;

  constructor(resource: Resource, name: string, kind: SpanKind, context: SpanContext, parent: SpanContext | undefined,
    start: HrTime, end: HrTime, attributes: Attributes, status: SpanStatus) {
    this.resource = resource;
    this.name = name;
    this.kind = kind;
    this.context = context;
    this.parentSpanContext = parent;
    this.startTime = start;
    this.endTime = end;
    this.attributes = attributes;
    this.status = status;
  }

  spanContext(): SpanContext {
    return this.context;
  }

  get duration(): HrTime {
    let s = this.endTime[0] - this.startTime[0];
    let ns = this.endTime[1] - this.startTime[1];
    if (ns < 0) {
      s--;
      ns += 1e9;
    }
    return [s, ns];
  }
}

/** What a Tracing may be given instead of its own exporter and ids (tests, benches). */
export interface TracingParts {
  /** Takes the http/protobuf path's encoded batches instead of the OTLP/HTTP exporter. */
  encodedExporter?: EncodedSpanExporter;
  /** Refills the id pool instead of the system's generator. */
  randomFill?: (pool: Uint8Array) => void;
}

export class Tracing {
  settings: TracingSettings;
  /** The export queue (its counts are on /metrics). */
  readonly queue: ExportQueue<unknown>;
  /** Requests sampled, and traceparents refused as invalid (for /metrics). */
  sampled = 0;
  invalidTraceparents = 0;
  private readonly resource: Resource;
  private readonly ids: IdSource;
  private readonly log: Pick<Log, 'warn' | 'debug'>;
  private readonly reader = new TraceContextReader();
  private readonly origin = performance.timeOrigin;
  /** The http/protobuf path: sampled requests kept, their spans written as protobuf in batches (span-writer.ts); null on the ReadableSpan path. */
  private readonly batch: SpanBatch | null = null;
  /** The http/protobuf path's request envelope (the resource and scope around a batch). */
  readonly envelope: BatchEnvelope | null = null;
  private readonly spans: BoundedSpanQueue | null = null;
  private readonly layout = new StepLayout();
  /** The stable OpenTelemetry database names on the request and operation spans as well (semconv.ts). */
  readonly stableDatabaseNames: boolean;

  /**
   * `exporter`: takes ReadableSpans (the http/json path; a test's exporter). Without one, http/json
   * uses the SDK's exporter and http/protobuf writes spans as protobuf directly.
   */
  constructor(settings: TracingSettings, log: Pick<Log, 'warn' | 'debug'>, exporter?: SpanExporter, parts: TracingParts = {}) {
    this.settings = settings;
    this.log = log;
    this.ids = new IdSource(parts.randomFill);
    this.stableDatabaseNames = stableDatabaseNames(settings.semconvStabilityOptIn ?? process.env[SEMCONV_OPT_IN_ENV]);
    this.resource = resourceFromAttributes({ ...settings.resourceAttributes, 'service.name': settings.serviceName });
    const opts = { maxQueue: settings.maxQueueSpans, maxBatch: settings.maxBatchSpans, intervalMs: settings.exportIntervalMs };
    if (exporter === undefined && settings.protocol === 'http/protobuf') {
      this.envelope = new BatchEnvelope(this.resource.attributes, SCOPE.name);
      const exp = parts.encodedExporter ?? new ThreadedTraceExporter(this.envelope, { url: settings.url, timeoutMillis: settings.exportTimeoutMs });
      const queue = new EncodedSpanQueue(exp, opts, log);
      this.batch = new SpanBatch(new SpanWriter(this.ids, this.origin, this.stableDatabaseNames), queue, log);
      this.queue = queue;
    } else {
      const exp = exporter ?? new JsonExporter({ url: settings.url, timeoutMillis: settings.exportTimeoutMs });
      this.queue = this.spans = new BoundedSpanQueue(exp, opts, log);
    }
  }

  /**
   * The client's trace context in the command `body` (`$traceparent`, else `comment`), or null.
   * Called only when the command has one of those fields. An invalid value is ignored (debug log,
   * counted); a comment that does not try to be a traceparent is not one (see TraceContextReader).
   */
  parent(body: Buffer, traceparentAt: number, commentAt: number, conn: number): TraceParent | null {
    const r = this.reader;
    if (!r.read(body, traceparentAt, commentAt)) return null;
    const p = parseTraceparent(r.text);
    if (typeof p === 'string') {
      this.invalidTraceparents++;
      this.log.debug('invalid traceparent ignored', { conn, source: r.source, reason: p, value: r.text.slice(0, 80) });
      return null;
    }
    return p;
  }

  /** A new sample_rate (a reload): requests that start from now on are sampled at it. */
  setSampleRate(rate: number): void {
    this.settings = { ...this.settings, sampleRate: rate };
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

  /** A finished span, child of `parent`, queued for export; returns its context (for its children). */
  private span(name: string, kind: SpanKind, traceId: string, parent: SpanContext | undefined, start: number, end: number,
    attributes: Attributes, error: boolean): SpanContext {
    const context: SpanContext = { traceId, spanId: this.ids.next(8), traceFlags: 1 };
    this.spans!.onEnd(new RecordedSpan(this.resource, name, kind, context, parent, this.time(start), this.time(end), attributes,
      error ? STATUS_ERROR : STATUS_UNSET));
    return context;
  }

  /**
   * A sampled request ended: its spans (SPEC §2.4), built from its recorded times, are queued — on
   * the http/protobuf path as a copy of `r` whose spans are written with the next batch (`r` and
   * its timings may be reused as soon as this returns); on the other, built and queued now.
   */
  record(r: TracedRequest): void {
    const b = this.batch;
    if (b !== null) {
      b.add(r);
      return;
    }
    const failed = !r.ok || r.errorCode !== 0;
    const errorType = failed ? errorTypeOf(r.errorCode, r.errorName) : '';
    const a = new SpanAttrs(r, this.stableDatabaseNames);
    const remote: SpanContext | undefined = r.parent === null ? undefined
      : { traceId: r.parent.traceId, spanId: r.parent.spanId, traceFlags: r.parent.flags, isRemote: true };
    const traceId = remote !== undefined ? remote.traceId : this.ids.next(16);
    const rootAttrs = a.operation();
    rootAttrs['proxy.request.duration_us'] = Math.round((r.endAt - r.readAt) * 1000);
    if (failed) addError(rootAttrs, r.errorCode, errorType);
    // The root is queued last (it ends last), but its id is needed by its children now.
    const root: SpanContext = { traceId, spanId: this.ids.next(8), traceFlags: 1 };
    // Attributes every child without its own additions shares (the exporter only reads them).
    const shared = a.db();

    const t = r.timings;
    const l = this.layout;
    l.start(r);
    while (l.nextStep()) {
      const timer = t.timers[l.step];
      const stepAttrs = a.step(timer.step, phaseName(timer.phase), Math.round(t.ns[l.step] / 1000), l.error, l.order);
      if (l.rejected) addError(stepAttrs, r.errorCode, errorType);
      const step = this.span(`proxy.step.${l.name}`, SpanKind.INTERNAL, traceId, root, l.at, l.end, stepAttrs, l.error);
      while (l.nextSubop()) {
        this.span(t.subNames[l.sub], SpanKind.INTERNAL, traceId, step, l.subAt, l.subEnd, a.subop(timer.step, Math.round(t.subNs[l.sub] / 1000)), false);
      }
    }

    if (r.upstreamStartedAt > 0) {
      const upEnd = r.upstreamRepliedAt > 0 ? r.upstreamRepliedAt : r.endAt;
      const up = this.span('proxy.upstream', SpanKind.INTERNAL, traceId, root, r.upstreamStartedAt, upEnd, shared, false);
      const acquired = r.upstreamAcquiredAt > 0 ? r.upstreamAcquiredAt : upEnd;
      this.span('connection.acquire', SpanKind.INTERNAL, traceId, up, r.upstreamStartedAt, acquired, shared, false);
      if (r.upstreamWrittenAt > 0) {
        // The operation failed when its reply reports a failure, or — no reply — when the request
        // failed (the call's own error: a timeout, a lost connection). A response step's rejection
        // of a good reply is that step's failure, not the operation's.
        const opFailed = r.upstreamRepliedAt > 0 ? r.reply.failed : failed;
        const opAttrs = opFailed || this.stableDatabaseNames ? a.operation() : shared;
        if (opFailed) {
          if (r.upstreamRepliedAt > 0) addError(opAttrs, r.reply.errorCode, errorTypeOf(r.reply.errorCode, r.reply.errorName));
          else addError(opAttrs, r.errorCode, errorType);
        }
        // The operation span is named as the database conventions name a client span: "{operation} {collection}".
        this.span(r.collection === '' ? r.op : `${r.op} ${r.collection}`, SpanKind.CLIENT, traceId, up,
          r.upstreamWrittenAt, upEnd, opAttrs, opFailed);
      }
    }
    this.spans!.onEnd(new RecordedSpan(this.resource, 'proxy.request', SpanKind.SERVER, root, remote,
      this.time(r.readAt), this.time(r.endAt), rootAttrs,
      failed ? { code: SpanStatusCode.ERROR, message: errorType } : STATUS_UNSET));
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
 * The http/protobuf path's sampled requests between their end and their spans' writing: admitted
 * against the queue's bound and copied when they end (add), written request after request into the
 * queue's arena when the queue asks (writePending: the export runs, a batch's worth is pending,
 * flush, shutdown). The spans and their ids are those the writer made at each request's end before:
 * the same writer, the same requests in the same order, the ids drawn as they are written.
 */
class SpanBatch implements PendingSpanSource {
  private readonly writer: SpanWriter;
  private readonly queue: EncodedSpanQueue;
  private readonly log: Pick<Log, 'warn'>;
  private readonly pending = new PendingTraces();

  constructor(writer: SpanWriter, queue: EncodedSpanQueue, log: Pick<Log, 'warn'>) {
    this.writer = writer;
    this.queue = queue;
    this.log = log;
    queue.setSource(this);
  }

  add(r: TracedRequest): void {
    const spans = PendingTraces.spansOf(r);
    if (!this.queue.admit(spans)) return;
    this.pending.add(r, spans);
    this.queue.admitted();
  }

  writePending(): void {
    const p = this.pending;
    const w = this.writer;
    const q = this.queue;
    let lost = 0;
    let error: unknown = null;
    for (let i = 0; i < p.count; i++) {
      const admitted = p.spansAt(i);
      try {
        const r = p.read(i);
        const failed = !r.ok || r.errorCode !== 0;
        const errorType = failed ? errorTypeOf(r.errorCode, r.errorName) : '';
        const replyType = r.upstreamRepliedAt > 0 && r.reply.failed ? errorTypeOf(r.reply.errorCode, r.reply.errorName) : '';
        w.reset();
        w.request(r, errorType, replyType);
        q.append(w.written(), w.spans, admitted);
      } catch (err) {
        // Not expected; but this runs on the export's timer, where a throw would end the process.
        q.lost(admitted);
        lost += admitted;
        error = err;
      }
    }
    p.clear();
    if (lost > 0) this.log.warn('trace spans could not be written; dropped', { spans: lost, error: String(error) });
  }

  discardPending(): void {
    this.pending.clear();
  }
}

/**
 * The attributes of one request's spans, each set a fresh object literal of one shape (no spreads:
 * they cost more than the span). The SPEC's names (the contract) on every span that has database
 * attributes; the stable OpenTelemetry database names (semantic conventions 1.33+) after them on
 * the request and operation spans, when opted in (semconv.ts). Attributes without a value (no
 * collection, no upstream) are left out: the exporter would send them as empty values.
 */
class SpanAttrs {
  private readonly op: string;
  private readonly dbName: string;
  private readonly coll: string | undefined;
  private readonly host: string | undefined;
  private readonly port: number | undefined;
  private readonly pipelineId: string;
  private readonly variant: Variant;
  private readonly stableNames: boolean;

  constructor(r: TracedRequest, stableNames: boolean) {
    this.op = r.op;
    this.dbName = r.db;
    this.coll = r.collection === '' ? undefined : r.collection;
    this.pipelineId = r.pipelineId;
    this.variant = r.variant;
    this.stableNames = stableNames;
    if (r.upstream !== '') {
      const i = r.upstream.lastIndexOf(':');
      this.host = r.upstream.slice(0, i);
      this.port = Number(r.upstream.slice(i + 1));
    }
  }

  /** The database attributes every span of the request carries (sub-operations aside). */
  db(): Attributes {
    return this.optional({
      'db.system': 'mongodb', 'db.operation': this.op,
      'proxy.pipeline.id': this.pipelineId, 'proxy.pipeline': this.variant,
    });
  }

  /** The request and operation spans' attributes: db(), then the stable names when opted in. */
  operation(): Attributes {
    const attrs = this.db();
    if (!this.stableNames) return attrs;
    attrs['db.system.name'] = 'mongodb';
    attrs['db.operation.name'] = this.op;
    attrs['db.namespace'] = this.dbName;
    if (this.coll !== undefined) attrs['db.collection.name'] = this.coll;
    if (this.host !== undefined) {
      attrs['server.address'] = this.host;
      attrs['server.port'] = this.port;
    }
    return attrs;
  }

  step(name: string, phase: string, durationUs: number, error: boolean, order: number): Attributes {
    return this.optional({
      'proxy.step.name': name, 'proxy.step.phase': phase, 'proxy.step.duration_us': durationUs,
      'proxy.step.error': error, 'proxy.step.order': order,
      'db.system': 'mongodb', 'db.operation': this.op,
      'proxy.pipeline.id': this.pipelineId, 'proxy.pipeline': this.variant,
    });
  }

  /** A plugin sub-operation: its step and the graph that ran it (a canary's spans all name their graph). */
  subop(step: string, durationUs: number): Attributes {
    return {
      'proxy.step.name': step, 'proxy.subop.duration_us': durationUs,
      'proxy.pipeline.id': this.pipelineId, 'proxy.pipeline': this.variant,
    };
  }

  /** Adds the contract's collection and upstream address attributes, when the request has them. */
  private optional(attrs: Attributes): Attributes {
    if (this.coll !== undefined) attrs['db.upstream.collection'] = this.coll;
    if (this.host !== undefined) {
      attrs['net.peer.name'] = this.host;
      attrs['net.peer.port'] = this.port;
    }
    return attrs;
  }
}

/**
 * `error.type`: the server's code name (`DuplicateKey`) — as the reply sent it, else from the codes
 * the proxy knows (write errors arrive without a name), else the code as a string; `error` when
 * there is no code at all.
 */
function errorTypeOf(code: number, name: string): string {
  if (name !== '') return name;
  if (code === 0) return 'error';
  return knownCodeName(code) ?? String(code);
}

function addError(attrs: Attributes, code: number, type: string): void {
  if (code !== 0) attrs['db.response.status_code'] = String(code);
  attrs['error.type'] = type;
}
