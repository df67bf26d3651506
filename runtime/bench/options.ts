// Parsing and validation of load-generator options: durations (`500ms`, `10s`, `1m`, `1.5s`),
// connection counts and the operation mix. Shared by `runBench` and the `proxy bench` command so
// both refuse the same values with the same message.
import { parseUpstreamUri } from '../upstream/index.ts';
import { BenchError } from './errors.ts';

export type BenchOp = 'find' | 'insert' | 'ping';
export const BENCH_OPS: readonly BenchOp[] = ['find', 'insert', 'ping'];

/** Upper bound on one run: a load generator left running for hours is a mistake, not a benchmark. */
const MAX_DURATION_MS = 24 * 3600 * 1000;
const MAX_CONNECTIONS = 10_000;

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function badOption(message: string): never {
  throw new BenchError('PROXY_ERR_BENCH_BAD_OPTION', message);
}

/** `500ms`, `10s`, `1m`, `1.5s`, `1h` → milliseconds. A bare number is refused: its unit is a guess. */
export function parseDuration(text: unknown, name = '--duration'): number {
  const s = String(text ?? '').trim();
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(s);
  if (m === null) badOption(`${name} "${s}" is not a duration (use e.g. 500ms, 10s, 1m)`);
  const ms = Math.round(Number(m[1]) * UNIT_MS[m[2]]);
  if (ms < 1) badOption(`${name} "${s}" is shorter than 1ms`);
  if (ms > MAX_DURATION_MS) badOption(`${name} "${s}" is longer than 24h`);
  return ms;
}

export function parseConnections(value: unknown, name = '--connections'): number {
  const s = String(value ?? '').trim();
  if (!/^\d+$/.test(s)) badOption(`${name} "${s}" is not a whole number`);
  const n = Number(s);
  if (n < 1 || n > MAX_CONNECTIONS) badOption(`${name} ${n} is outside 1..${MAX_CONNECTIONS}`);
  return n;
}

export function parseOp(value: unknown): BenchOp {
  const s = String(value ?? '');
  if (!(BENCH_OPS as readonly string[]).includes(s)) badOption(`--op "${s}" is not one of ${BENCH_OPS.join(', ')}`);
  return s as BenchOp;
}

/** The first host of a `mongodb://` URI; the bench drives one server, like the proxy fronts one. */
export function parseTarget(uri: unknown): { host: string; port: number } {
  const s = String(uri ?? '');
  try {
    const a = parseUpstreamUri(s);
    return a.hosts.current()[0];
  } catch (err) {
    return badOption(`--target: ${(err as Error).message.replace(/^upstream\.uri/, 'target')}`);
  }
}
