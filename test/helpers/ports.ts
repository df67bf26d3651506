// A TCP port free on 127.0.0.1 right now: for a test that must name a port before something listens
// on it (a child process, a reload that moves a listener). Port 0 is better wherever it can be used.
//
// The port is drawn below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768–60999
// by default), never from it: a port handed out by listen(0) and released would be free for the
// kernel to give again to anything else that binds port 0 or connects — an embedded upstream, a
// client socket — before the child that was meant to get it binds it (seen in CI: a proxy's
// listener and its embedded upstream given the same port).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOW = 20_000;
const high = ephemeralLow() - 1;

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > LOW + 1000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function tryListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * Ports this process handed out: never handed out again. A port is free when checked but taken only
 * when its child binds it, so two callers in a row (instances of a fleet started at once) could
 * otherwise both be given it (seen in CI: EADDRINUSE on a fleet instance's listener).
 */
const handedOut = new Set<number>();

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOW + Math.floor(Math.random() * (high - LOW + 1));
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    if (await tryListen(port)) return port;
  }
  throw new Error(`no free port found in ${LOW}–${high} after 200 tries`);
}
