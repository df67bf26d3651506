// Sends the OTLP/HTTP protobuf trace exports of the event loop (export-thread.ts), in a worker
// thread with plain Node (no TypeScript loader). The transport is the OpenTelemetry SDK's — retries,
// timeout, headers, compression, the concurrency limit and the OTEL_EXPORTER_OTLP_* environment, as
// its OTLPTraceExporter (@opentelemetry/exporter-trace-otlp-proto) builds them — fed requests the
// event loop has already encoded whole (span-writer.ts), so the serializer passes them through.
// Responses are decoded by the SDK's.
// Protocol: workerData { url, timeoutMillis };
//   { id, bytes: Uint8Array (transferred: an ExportTraceServiceRequest), spans } → { id, ok, message? }
//   { id, shutdown: true } → { id, ok: true } once the requests in flight have ended.
import { parentPort, workerData } from 'node:worker_threads';
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { createOtlpHttpExportDelegate, convertLegacyHttpOptions } from '@opentelemetry/otlp-exporter-base/node-http';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';

// The event loop comes first: on Linux the nice value is per thread (setpriority(2) on a thread
// id), so this thread yields the CPU to the proxy's event loop whenever both want it.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
} catch {
  // not Linux: the thread still keeps the exports off the event loop
}

const serializer = {
  serializeRequest: (batch) => batch.bytes,
  deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
};
const exporter = new OTLPExporterBase(createOtlpHttpExportDelegate(
  convertLegacyHttpOptions(workerData, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
  serializer, 'otlp_http_span_exporter', { name: 'span', countItems: (batch) => batch.spans }, undefined));

parentPort.on('message', (m) => {
  if (m.shutdown === true) {
    exporter.shutdown().then(() => parentPort.postMessage({ id: m.id, ok: true }),
      (err) => parentPort.postMessage({ id: m.id, ok: false, message: String(err?.message ?? err) }));
    return;
  }
  exporter.export({ bytes: m.bytes, spans: m.spans }, (result) => {
    parentPort.postMessage(result.code === 0 ? { id: m.id, ok: true }
      : { id: m.id, ok: false, message: String(result.error?.message ?? 'export failed') });
  });
});
