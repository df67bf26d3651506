// Decompresses OP_COMPRESSED messages too large to inflate on the event loop (inflate-pool.ts),
// one at a time, in a worker thread with plain Node (no TypeScript loader).
// Protocol: { id, compressor, data: Uint8Array, size, requestId, responseTo, opcode }
//   → { id, ok: true, frame: ArrayBuffer (transferred), heap } | { id, ok: false, message, heap }.
// `frame` is the whole decompressed message, header included, so the event loop neither copies
// nor allocates it. `heap`: zstd's WebAssembly memory afterwards (it never shrinks; the pool
// replaces a worker whose memory grew past its bound).
import { parentPort } from 'node:worker_threads';
import { InflateError, inflateBody, initZstd, zstdHeapBytes } from './compressors.mjs';

const HEADER_SIZE = 16;
const NAMES = ['noop', 'snappy', 'zlib', 'zstd'];

await initZstd();

parentPort.on('message', (m) => {
  let frame;
  try {
    frame = new ArrayBuffer(HEADER_SIZE + m.size);
    const view = new DataView(frame);
    view.setInt32(0, HEADER_SIZE + m.size, true);
    view.setInt32(4, m.requestId, true);
    view.setInt32(8, m.responseTo, true);
    view.setInt32(12, m.opcode, true);
    inflateBody(m.compressor, m.data, m.size, new Uint8Array(frame), HEADER_SIZE);
  } catch (err) {
    const message = err instanceof InflateError ? err.message : `could not decompress a ${NAMES[m.compressor]} message: ${err.message}`;
    parentPort.postMessage({ id: m.id, ok: false, message, heap: zstdHeapBytes() });
    return;
  }
  parentPort.postMessage({ id: m.id, ok: true, frame, heap: zstdHeapBytes() }, [frame]);
});
