// A TCP port free on 127.0.0.1 right now: for a test that must name a port before something listens
// on it (a child process, a reload that moves a listener). Port 0 is better wherever it can be used.
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}
