// Decompresses OP_COMPRESSED messages too large to inflate on the event loop (inflate-pool.ts),
// one at a time, in a worker thread with plain Node (no TypeScript loader).
// Protocol: { id, compressor, data: Uint8Array, size, requestId, responseTo, opcode }
//   → { id, ok: true, frame: ArrayBuffer (transferred), heap } | { id, ok: false, message, moreToCome, heap }.
// `frame` is the whole decompressed message, header included, so the event loop neither copies
// nor allocates it. `heap`: zstd's WebAssembly memory afterwards (it never shrinks; the pool
// replaces a worker whose memory grew past its bound). `moreToCome`, for a message that failed: the
// OP_MSG flag read from the start of its data (firstUncompressedByte), or null when it is not an
// OP_MSG or the flag cannot be read — whether its client expects the error as a reply.
import { parentPort } from 'node:worker_threads';
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { InflateError, firstUncompressedByte, inflateBody, initZstd, zstdHeapBytes } from './compressors.mjs';

const HEADER_SIZE = 16;
const OP_MSG = 2013;
const MSG_MORE_TO_COME = 2;
const NAMES = ['noop', 'snappy', 'zlib', 'zstd'];

// The event loop comes first: on Linux the nice value is per thread (setpriority(2) on a thread
// id), so this thread yields the CPU to the proxy's event loop whenever both want it. Elsewhere
// (no /proc/thread-self) it runs at the process's priority.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
} catch {
  // not Linux: the worker still runs off the event loop
}

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
    const first = m.opcode === OP_MSG ? firstUncompressedByte(m.compressor, m.data) : undefined;
    const moreToCome = first === undefined ? null : (first & MSG_MORE_TO_COME) !== 0;
    parentPort.postMessage({ id: m.id, ok: false, message, moreToCome, heap: zstdHeapBytes() });
    return;
  }
  parentPort.postMessage({ id: m.id, ok: true, frame, heap: zstdHeapBytes() }, [frame]);
});
