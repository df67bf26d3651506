// Files a configuration names besides itself — TLS PEM files, the upstream URI's tlsCAFile and
// tlsCertificateKeyFile, step modules — are read whole. A device or a pipe has no end (/dev/zero)
// or blocks until a writer comes (a FIFO): reading one would grow memory without bound, or hang a
// start or a reload, while every client waits. So only regular files (symlinks followed) are read;
// anything else is refused like a file that does not exist, with the path and the reason.
import { readFileSync, statSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';

const NOT_REGULAR = 'not a regular file (a device, pipe or directory is not read)';

/** The bytes of a regular file; throws (ENOENT, EACCES, or "not a regular file") otherwise. */
export function readRegularFileSync(path: string): Buffer {
  if (!statSync(path).isFile()) throw new Error(NOT_REGULAR);
  return readFileSync(path);
}

/** readRegularFileSync, asynchronously. */
export async function readRegularFile(path: string): Promise<Buffer> {
  if (!(await stat(path)).isFile()) throw new Error(NOT_REGULAR);
  return readFile(path);
}
