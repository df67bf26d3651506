// Test helper: a real OTLP/HTTP trace receiver — a plain HTTP server on 127.0.0.1 that decodes
// each POST /v1/traces body (protobuf ExportTraceServiceRequest, or the JSON encoding) into spans.
// The protobuf is read with a small wire-format reader written for this (field numbers from
// opentelemetry-proto: collector/trace/v1 and trace/v1), so the test checks what went on the wire.
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
        fn(field, wire, new Reader(this.buf, this.pos, this.pos + len));
        this.pos += len;
      } else if (wire === 5) {
        fn(field, wire, this.buf.subarray(this.pos, this.pos + 4));
        this.pos += 4;
      } else throw new Error(`unsupported wire type ${wire}`);
    }
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
