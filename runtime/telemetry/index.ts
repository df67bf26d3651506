export { Tracing, tracesUrl, type TracingSettings, type TracedRequest } from './tracing.ts';
export { TracingRecorder } from './trace-recorder.ts';
export { parseTraceparent, removeElement, TraceContextReader, type TraceParent } from './traceparent.ts';
export { BoundedSpanQueue } from './span-queue.ts';
