// The OTLP/HTTP protobuf trace exporter (docs/tracing.md). Spans arrive already encoded, as
// ScopeSpans.spans entries written by span-writer.ts when each sampled request ends (bytes the
// SDK's ProtobufTraceSerializer would make of the same spans: test/telemetry/span-writer.test.ts);
// the serializer here only puts a batch in its ExportTraceServiceRequest envelope. Everything else —
// the HTTP transport, retries, timeout, headers, compression, the concurrency limit and the
// OTEL_EXPORTER_OTLP_* environment — is the SDK's, built as its OTLPTraceExporter
// (@opentelemetry/exporter-trace-otlp-proto) builds it. Responses are decoded by the SDK's.
//
// The JSON protocol (http/json) is not here: it stays the SDK's exporter, fed ReadableSpans.
import { ProtobufTraceSerializer, type ISerializer, type IExportTraceServiceResponse } from '@opentelemetry/otlp-transformer';
import { OTLPExporterBase, type OTLPExporterNodeConfigBase } from '@opentelemetry/otlp-exporter-base';
import { createOtlpHttpExportDelegate, convertLegacyHttpOptions } from '@opentelemetry/otlp-exporter-base/node-http';
import type { EncodedSpanExporter, EncodedSpans } from './span-queue.ts';
import type { BatchEnvelope } from './span-writer.ts';

/**
 * The OTLP/HTTP protobuf exporter of spans already encoded by span-writer.ts: the same transport,
 * retries, timeout, headers, compression and environment as OtlpProtoTraceExporter; the serializer
 * only puts the batch in its envelope.
 */
export class OtlpEncodedTraceExporter extends OTLPExporterBase<EncodedSpans> implements EncodedSpanExporter {
  constructor(envelope: BatchEnvelope, config: OTLPExporterNodeConfigBase = {}) {
    const serializer: ISerializer<EncodedSpans, IExportTraceServiceResponse> = {
      serializeRequest: (batch) => envelope.wrap(batch.bytes),
      deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
    };
    super(createOtlpHttpExportDelegate(
      convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
      serializer, 'otlp_http_span_exporter', { name: 'span', countItems: (batch: EncodedSpans) => batch.spans }, config.selfObsMeterProvider));
  }
}
