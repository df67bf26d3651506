// Per-request frames → folded stacks (`a;b;c value`, one line per stack, value in microseconds,
// fractional), the input of the flame graph and the `?format=folded` output. Levels (SPEC §2.9):
//   request pipeline / upstream / response pipeline      (and `proxy` for the rest of the total:
//   → steps (wasm:<name>)                                  framing, queueing, writing the reply)
//   → sub-operations (cache.lookup, connection.acquire …)
// A parent's own time is its own line (a step's time minus its sub-operations'), so widths add up.
import type { RequestFrame } from './frames.ts';
import { Phase } from '../wasm/index.ts';

export const TOP_REQUEST = 'request pipeline';
export const TOP_UPSTREAM = 'upstream';
export const TOP_RESPONSE = 'response pipeline';
export const TOP_PROXY = 'proxy';
export const ACQUIRE = 'connection.acquire';

/** Stack → total microseconds over `frames`. Insertion order: first seen first. */
export function foldFrames(frames: readonly RequestFrame[]): Map<string, number> {
  const out = new Map<string, number>();
  let weight = 1;
  const add = (stack: string, ns: number) => {
    if (ns <= 0) return;
    out.set(stack, (out.get(stack) ?? 0) + (ns * weight) / 1000);
  };
  for (const f of frames) {
    weight = f.weight;
    let stepsNs = 0;
    for (const s of f.steps) {
      const top = s.phase === Phase.Request ? TOP_REQUEST : TOP_RESPONSE;
      let subNs = 0;
      for (const o of s.subops) {
        add(`${top};${s.name};${o.name}`, o.ns);
        subNs += o.ns;
      }
      add(`${top};${s.name}`, Math.max(0, s.ns - subNs));
      stepsNs += s.ns;
    }
    add(`${TOP_UPSTREAM};${ACQUIRE}`, f.acquireNs);
    add(TOP_UPSTREAM, f.upstreamNs);
    add(TOP_PROXY, f.totalNs - stepsNs - f.acquireNs - f.upstreamNs);
  }
  return out;
}

/** The folded text: one `stack value` line per stack (value in µs, 3 decimals). */
export function foldedText(folded: Map<string, number>): string {
  let s = '';
  for (const [stack, us] of folded) s += `${stack} ${Number(us.toFixed(3))}\n`;
  return s;
}
