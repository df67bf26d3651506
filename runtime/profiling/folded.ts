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

// What a frame name may not hold: `;` separates frames and a line break ends a stack line, in the
// folded text and in the flame graph's tree alike. Sub-operation names are the plugins' (a plugin
// may name one after a request's collection, a string the client chose): each such character
// becomes `_`, so no name forges a frame, a line or a count.
// eslint-disable-next-line no-control-regex -- matching the control characters is the point
const NOT_IN_FRAME = /[;\u0000-\u001f\u007f]/g;

/** `name` as one frame of a folded stack. */
export function frameName(name: string): string {
  NOT_IN_FRAME.lastIndex = 0;
  return NOT_IN_FRAME.test(name) ? name.replace(NOT_IN_FRAME, '_') : name;
}

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
      const step = frameName(s.name);
      let subNs = 0;
      for (const o of s.subops) {
        add(`${top};${step};${frameName(o.name)}`, o.ns);
        subNs += o.ns;
      }
      add(`${top};${step}`, Math.max(0, s.ns - subNs));
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
