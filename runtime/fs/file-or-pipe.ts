// The configuration file itself may be a pipe on purpose: a named FIFO, or process substitution
// (`serve --config <(render-config)`), so it is read whatever it is, up to a bound the caller sets.
// A pipe that nobody writes to would block that read forever — opening a FIFO waits for a writer,
// reading waits for data — and a blocked read holds one of libuv's four threadpool threads for
// good. So the file is opened non-blocking (returns at once) and a pipe is read through the event
// loop (a net.Socket over the descriptor: epoll, no thread), with an idle bound: no data and no end
// for `idleMs` is an error naming the wait. A regular file ignores O_NONBLOCK and is read as usual.
// A pipe that ends without data is an error too: a process substitution's /dev/fd/N opened again
// (a reload) ends at once, and reading that as an empty file would reload the defaults.
import { close, constants, fstat, open, read } from 'node:fs';
import { Socket } from 'node:net';
import { promisify } from 'node:util';

const FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;
const openFd = promisify(open);
const fstatFd = promisify(fstat);
const readFd = promisify(read);
const closeFd = promisify(close);

export interface ReadLimits {
  /** Bytes read at most: one more is read, so the caller can tell a file that is larger. */
  maxBytes: number;
  /** How long a pipe may stay silent (no data, no end) before the read fails. */
  idleMs: number;
}

/** The first maxBytes + 1 bytes of the file or pipe at `path`. */
export async function readFileOrPipe(path: string, limits: ReadLimits): Promise<Buffer> {
  const fd = await openFd(path, FLAGS);
  let handed = false;
  try {
    if ((await fstatFd(fd)).isFIFO()) {
      handed = true; // the socket owns the descriptor from here, and closes it
      return await readPipe(fd, limits);
    }
    const buf = Buffer.allocUnsafe(limits.maxBytes + 1);
    let n = 0;
    while (n < buf.length) {
      const { bytesRead } = await readFd(fd, buf, n, buf.length - n, null);
      if (bytesRead === 0) break;
      n += bytesRead;
    }
    return buf.subarray(0, n);
  } finally {
    if (!handed) await closeFd(fd);
  }
}

function readPipe(fd: number, limits: ReadLimits): Promise<Buffer> {
  const sock = new Socket({ fd, readable: true, writable: false });
  const chunks: Buffer[] = [];
  let n = 0;
  return new Promise<Buffer>((resolve, reject) => {
    const done = (err: Error | null) => {
      sock.removeAllListeners();
      sock.on('error', () => {}); // after the outcome: nothing more to say
      sock.destroy();
      if (err !== null) reject(err);
      else resolve(Buffer.concat(chunks, n).subarray(0, limits.maxBytes + 1));
    };
    sock.setTimeout(limits.idleMs, () => done(new Error(`a pipe with no data and no end of file for ${limits.idleMs / 1000} s (a FIFO is read ` +
      'only while a writer writes to it and then closes it)')));
    sock.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      n += chunk.length;
      if (n > limits.maxBytes) done(null);
    });
    sock.on('end', () => done(n === 0 ? new Error('the pipe ended without data (a pipe such as <(…) is read once: it cannot be read again ' +
      'for a reload)') : null));
    sock.on('error', (err) => done(err));
  });
}
