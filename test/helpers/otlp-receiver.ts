// Test helper: a real OTLP/HTTP trace receiver — a plain HTTP server on 127.0.0.1 that decodes
// each POST /v1/traces body (protobuf ExportTraceServiceRequest, or the JSON encoding) into spans.
// The protobuf is read with a small wire-format reader written for this (field numbers from
// opentelemetry-proto: collector/trace/v1 and trace/v1), so the test checks what went on the wire;
// decodeTraceRequestFields() reads every field of the schema with it (the encoder tests compare
// whole requests).
import { createServer, type Server } from 'node:http';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, string | number | boolean>;
  /** Status code: 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, string | number | boolean>;
}

class Reader {
  pos: number;
  constructor(readonly buf: Buffer, start = 0, readonly end = buf.length) {
    this.pos = start;
  }
  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  }
  /** Calls fn(field, wireType, reader-of-a-length-delimited-value | value) for each field. */
  fields(fn: (field: number, wire: number, r: Reader | bigint | Buffer) => void): void {
    while (this.pos < this.end) {
      const key = Number(this.varint());
      const field = key >>> 3;
      const wire = key & 7;
      if (wire === 0) fn(field, wire, this.varint());
      else if (wire === 1) {
        fn(field, wire, this.buf.subarray(this.pos, this.pos + 8));
        this.pos += 8;
      } else if (wire === 2) {
        const len = Number(this.varint());
        if (this.pos + len > this.end) throw new Error(`field ${field}: ${len} bytes past its message's end`);
        fn(field, wire, new Reader(this.buf, this.pos, this.pos + len));
        this.pos += len;
      } else if (wire === 5) {
        fn(field, wire, this.buf.subarray(this.pos, this.pos + 4));
        this.pos += 4;
      } else throw new Error(`unsupported wire type ${wire}`);
    }
    if (this.pos !== this.end) throw new Error(`a field runs ${this.pos - this.end} bytes past its message's end`);
  }
  bytes(): Buffer {
    return this.buf.subarray(this.pos, this.end);
  }
}

function anyValue(r: Reader): string | number | boolean {
  let v: string | number | boolean = '';
  r.fields((f, _w, x) => {
    if (f === 1) v = (x as Reader).bytes().toString('utf8');
    else if (f === 2) v = (x as bigint) !== 0n;
    else if (f === 3) v = Number(BigInt.asIntN(64, x as bigint));
    else if (f === 4) v = (x as Buffer).readDoubleLE(0);
  });
  return v;
}

function keyValue(r: Reader, into: Record<string, string | number | boolean>): void {
  let key = '';
  let value: string | number | boolean = '';
  r.fields((f, _w, x) => {
    if (f === 1) key = (x as Reader).bytes().toString('utf8');
    else if (f === 2) value = anyValue(x as Reader);
  });
  into[key] = value;
}

/** Decodes an ExportTraceServiceRequest (protobuf). */
export function decodeTraceRequest(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  new Reader(body).fields((f, _w, rs) => {
    if (f !== 1) return; // resource_spans
    const resource: Record<string, string | number | boolean> = {};
    const spans: ReceivedSpan[] = [];
    (rs as Reader).fields((f2, _w2, x) => {
      if (f2 === 1) (x as Reader).fields((f3, _w3, kv) => { if (f3 === 1) keyValue(kv as Reader, resource); });
      else if (f2 === 2) {
        (x as Reader).fields((f3, _w3, sr) => {
          if (f3 !== 2) return; // spans
          const s: ReceivedSpan = { traceId: '', spanId: '', parentSpanId: '', name: '', kind: 0, startNs: 0n, endNs: 0n, attributes: {}, status: 0, resource };
          (sr as Reader).fields((k, _wk, v) => {
            if (k === 1) s.traceId = (v as Reader).bytes().toString('hex');
            else if (k === 2) s.spanId = (v as Reader).bytes().toString('hex');
            else if (k === 4) s.parentSpanId = (v as Reader).bytes().toString('hex');
            else if (k === 5) s.name = (v as Reader).bytes().toString('utf8');
            else if (k === 6) s.kind = Number(v as bigint);
            else if (k === 7) s.startNs = (v as Buffer).readBigUInt64LE(0);
            else if (k === 8) s.endNs = (v as Buffer).readBigUInt64LE(0);
            else if (k === 9) keyValue(v as Reader, s.attributes);
            else if (k === 15) (v as Reader).fields((sf, _sw, sv) => { if (sf === 3) s.status = Number(sv as bigint); });
          });
          spans.push(s);
        });
      }
    });
    out.push(...spans);
  });
  return out;
}

// ---- Every field: a schema-driven decoder of a whole ExportTraceServiceRequest ---------------

/** A decoded message: field name → value (repeated fields: an array in wire order); absent fields are absent. */
export interface DecodedMessage {
  [field: string]: DecodedValue | DecodedValue[];
}
export type DecodedValue = string | number | bigint | boolean | DecodedMessage;

type FieldType = 'string' | 'bytes' | 'uint32' | 'int64' | 'bool' | 'double' | 'fixed64' | 'fixed32' | MessageSchema;
interface MessageSchema {
  name: string;
  /** field number → [name, type, repeated] */
  fields: Record<number, [string, FieldType, boolean?]>;
}

// opentelemetry-proto: common/v1, resource/v1, trace/v1, collector/trace/v1.
const AnyValueSchema: MessageSchema = { name: 'AnyValue', fields: {} };
const KeyValueSchema: MessageSchema = { name: 'KeyValue', fields: { 1: ['key', 'string'], 2: ['value', AnyValueSchema] } };
const ArrayValueSchema: MessageSchema = { name: 'ArrayValue', fields: { 1: ['values', AnyValueSchema, true] } };
const KeyValueListSchema: MessageSchema = { name: 'KeyValueList', fields: { 1: ['values', KeyValueSchema, true] } };
Object.assign(AnyValueSchema.fields, {
  1: ['string_value', 'string'], 2: ['bool_value', 'bool'], 3: ['int_value', 'int64'], 4: ['double_value', 'double'],
  5: ['array_value', ArrayValueSchema], 6: ['kvlist_value', KeyValueListSchema], 7: ['bytes_value', 'bytes'],
});
const ResourceSchema: MessageSchema = { name: 'Resource', fields: { 1: ['attributes', KeyValueSchema, true], 2: ['dropped_attributes_count', 'uint32'] } };
const ScopeSchema: MessageSchema = {
  name: 'InstrumentationScope',
  fields: { 1: ['name', 'string'], 2: ['version', 'string'], 3: ['attributes', KeyValueSchema, true], 4: ['dropped_attributes_count', 'uint32'] },
};
const StatusSchema: MessageSchema = { name: 'Status', fields: { 2: ['message', 'string'], 3: ['code', 'uint32'] } };
const EventSchema: MessageSchema = {
  name: 'Span.Event',
  fields: { 1: ['time_unix_nano', 'fixed64'], 2: ['name', 'string'], 3: ['attributes', KeyValueSchema, true], 4: ['dropped_attributes_count', 'uint32'] },
};
const LinkSchema: MessageSchema = {
  name: 'Span.Link',
  fields: {
    1: ['trace_id', 'bytes'], 2: ['span_id', 'bytes'], 3: ['trace_state', 'string'], 4: ['attributes', KeyValueSchema, true],
    5: ['dropped_attributes_count', 'uint32'], 6: ['flags', 'fixed32'],
  },
};
const SpanSchema: MessageSchema = {
  name: 'Span',
  fields: {
    1: ['trace_id', 'bytes'], 2: ['span_id', 'bytes'], 3: ['trace_state', 'string'], 4: ['parent_span_id', 'bytes'], 5: ['name', 'string'],
    6: ['kind', 'uint32'], 7: ['start_time_unix_nano', 'fixed64'], 8: ['end_time_unix_nano', 'fixed64'], 9: ['attributes', KeyValueSchema, true],
    10: ['dropped_attributes_count', 'uint32'], 11: ['events', EventSchema, true], 12: ['dropped_events_count', 'uint32'],
    13: ['links', LinkSchema, true], 14: ['dropped_links_count', 'uint32'], 15: ['status', StatusSchema], 16: ['flags', 'fixed32'],
  },
};
const ScopeSpansSchema: MessageSchema = { name: 'ScopeSpans', fields: { 1: ['scope', ScopeSchema], 2: ['spans', SpanSchema, true],
  3: ['schema_url', 'string'] } };
const ResourceSpansSchema: MessageSchema = {
  name: 'ResourceSpans', fields: { 1: ['resource', ResourceSchema], 2: ['scope_spans', ScopeSpansSchema, true], 3: ['schema_url', 'string'] },
};
const RequestSchema: MessageSchema = { name: 'ExportTraceServiceRequest', fields: { 1: ['resource_spans', ResourceSpansSchema, true] } };

const WIRE_OF: Record<string, number> = { string: 2, bytes: 2, uint32: 0, int64: 0, bool: 0, double: 1, fixed64: 1, fixed32: 5 };
const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeMessage(r: Reader, schema: MessageSchema): DecodedMessage {
  const out: DecodedMessage = {};
  r.fields((f, wire, x) => {
    const field = schema.fields[f];
    if (field === undefined) throw new Error(`${schema.name}: unknown field ${f}`);
    const [name, type, repeated] = field;
    const wantWire = typeof type === 'string' ? WIRE_OF[type] : 2;
    if (wire !== wantWire) throw new Error(`${schema.name}.${name}: wire type ${wire}, expected ${wantWire}`);
    let v: DecodedValue;
    if (typeof type !== 'string') v = decodeMessage(x as Reader, type);
    else if (type === 'string') v = utf8.decode((x as Reader).bytes());
    else if (type === 'bytes') v = (x as Reader).bytes().toString('hex');
    else if (type === 'uint32') {
      const n = x as bigint;
      if (n > 0xffffffffn) throw new Error(`${schema.name}.${name}: ${n} is not a uint32`);
      v = Number(n);
    } else if (type === 'int64') v = BigInt.asIntN(64, x as bigint);
    else if (type === 'bool') {
      if ((x as bigint) > 1n) throw new Error(`${schema.name}.${name}: ${String(x)} is not a bool`);
      v = (x as bigint) === 1n;
    } else if (type === 'double') v = (x as Buffer).readDoubleLE(0);
    else if (type === 'fixed64') v = (x as Buffer).readBigUInt64LE(0);
    else v = (x as Buffer).readUInt32LE(0);
    if (repeated) ((out[name] ??= []) as DecodedValue[]).push(v);
    else if (name in out) throw new Error(`${schema.name}.${name}: sent twice`);
    else out[name] = v;
  });
  return out;
}

/**
 * Decodes every field of an ExportTraceServiceRequest (protobuf) by the opentelemetry-proto schema;
 * throws on a field the schema does not have, a wrong wire type, invalid UTF-8 or a singular field
 * sent twice. Doubles keep their bits: NaN decodes as NaN (deepStrictEqual treats NaN as NaN).
 */
export function decodeTraceRequestFields(body: Uint8Array): DecodedMessage {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const r = new Reader(buf);
  return decodeMessage(r, RequestSchema);
}

/** Decodes the OTLP JSON encoding (ids in hex, times as strings). */
export function decodeTraceJson(body: Buffer): ReceivedSpan[] {
  type JV = { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number };
  const val = (v: JV) => v.stringValue ?? v.boolValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue ?? '');
  const attrs = (kvs: Array<{ key: string; value: JV }> | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, val(kv.value)]));
  const doc = JSON.parse(body.toString('utf8'));
  const out: ReceivedSpan[] = [];
  for (const rs of doc.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId ?? '', name: s.name, kind: s.kind,
          startNs: BigInt(s.startTimeUnixNano), endNs: BigInt(s.endTimeUnixNano), attributes: attrs(s.attributes),
          status: s.status?.code ?? 0, resource,
        });
      }
    }
  }
  return out;
}

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Export requests received, with their content type. */
  readonly requests: Array<{ contentType: string; spans: number }>;
  /** Resolves once at least `n` spans arrived (rejects after `timeoutMs`). */
  waitForSpans(n: number, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(opts: { delayMs?: number } = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: Array<{ contentType: string; spans: number }> = [];
  let waiters: Array<() => void> = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = String(req.headers['content-type'] ?? '');
      const got = req.url === '/v1/traces'
        ? (contentType.includes('json') ? decodeTraceJson(body) : decodeTraceRequest(body))
        : [];
      const answer = () => {
        requests.push({ contentType, spans: got.length });
        spans.push(...got);
        res.writeHead(req.url === '/v1/traces' ? 200 : 404, { 'content-type': contentType.includes('json') ? 'application/json' : 'application/x-protobuf' });
        res.end(contentType.includes('json') ? '{}' : undefined);
        const w = waiters;
        waiters = [];
        for (const fn of w) fn();
      };
      if (opts.delayMs !== undefined) setTimeout(answer, opts.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    async waitForSpans(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (spans.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`expected ${n} spans, received ${spans.length}`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, left);
          waiters.push(() => { clearTimeout(t); resolve(); });
        });
      }
      return spans;
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
