// Files a configuration names besides itself — TLS PEM files, the upstream URI's tlsCAFile and
// tlsCertificateKeyFile, step modules — are read whole. A device or a pipe has no end (/dev/zero)
// or blocks until a writer comes (a FIFO): reading one would grow memory without bound, or hang a
// start or a reload, while every client waits. So only regular files (symlinks followed) are read;
// anything else is refused like a file that does not exist, with the path and the reason.
//
// The file is judged by the descriptor that is then read, never by its path beforehand: a path
// stat'ed as regular could be swapped for a FIFO before the open. The open cannot block —
// O_NONBLOCK makes opening a FIFO return at once — and O_NOCTTY keeps a terminal named by mistake
// from becoming the process's controlling terminal. Reading a regular file ignores O_NONBLOCK.
import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';

const FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;

const NOT_REGULAR = 'not a regular file (a device, pipe or directory is not read)';

/** The "not a regular file" error, for a descriptor that is not one or a path only special files fail to open with. */
function notRegular(cause?: unknown): Error {
  return new Error(NOT_REGULAR, cause === undefined ? undefined : { cause });
}

/** ENXIO: opening a socket, or a device with nothing behind it; never a regular file. */
function openFailure(err: unknown): unknown {
  return (err as NodeJS.ErrnoException).code === 'ENXIO' ? notRegular(err) : err;
}

/** The bytes of a regular file; throws (ENOENT, EACCES, or "not a regular file") otherwise. */
export function readRegularFileSync(path: string): Buffer {
  return readRegularFileStatSync(path).bytes;
}

/**
 * readRegularFileSync, with the file's status as the descriptor read shows it (its mode: a key
 * file readable by others is refused). `maxBytes`: a larger file throws without being read.
 */
export function readRegularFileStatSync(path: string, maxBytes = Infinity): { bytes: Buffer; stat: Stats } {
  let fd: number;
  try {
    fd = openSync(path, FLAGS);
  } catch (err) {
    throw openFailure(err);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw notRegular();
    if (stat.size > maxBytes) throw new Error(`larger than ${maxBytes} bytes`);
    return { bytes: readFileSync(fd), stat };
  } finally {
    closeSync(fd);
  }
}

/** readRegularFileSync, asynchronously. */
export async function readRegularFile(path: string): Promise<Buffer> {
  const fh = await open(path, FLAGS).catch((err: unknown) => {
    throw openFailure(err);
  });
  try {
    if (!(await fh.stat()).isFile()) throw notRegular();
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}
