// The ABI functions the host calls. A plugin re-exports them with one line:
//   export * from "<path>/sdk/assembly/exports";
import { Context } from "./context";
import { Step, currentStep } from "./step";
import { RequestContext } from "./request";
import { proxy_set_phases, proxy_request_contexts, Phase, CallFlag, MAX_REQUEST_CONTEXTS } from "./host";
import { setSubopsTimed } from "./metrics";

// The ABI version this plugin is built for, exported as a constant global the host reads at load.
export { proxy_abi_version } from "./abi";

const ctx = new Context();
// The buffer the host fills through proxy_alloc; kept reachable (GC) until the next call.
let hostBuf: ArrayBuffer | null = null;
/** Request contexts by the host's number, when the step uses them. The object of a number is
 *  reused by the next request that gets the number (the host hands out low numbers first). */
let contexts: Array<RequestContext | null> | null = null;

export function proxy_alloc(size: i32): usize {
  const b = new ArrayBuffer(size);
  hostBuf = b;
  return changetype<usize>(b);
}

export function proxy_on_configure(ptr: usize, len: i32): i32 {
  const config = String.UTF8.decodeUnsafe(ptr, len);
  hostBuf = null;
  const step = currentStep();
  if (!step.onConfigure(config)) return 1;
  proxy_set_phases(step.phases);
  // A step that makes request contexts gets them (the host grants them when it acts in both phases).
  const first = step.newRequestContext();
  if (first !== null) {
    const open = new Array<RequestContext | null>(1);
    unchecked(open[0] = first);
    contexts = open;
    proxy_request_contexts(MAX_REQUEST_CONTEXTS);
  }
  return 0;
}

export function proxy_on_request(bodySize: i32, flags: i32, context: i32): i32 {
  ctx.reset(Phase.Request, bodySize, flags);
  setSubopsTimed((flags & CallFlag.TimeSubops) != 0);
  const step = currentStep();
  setRequest(context >= 0 ? contextFor(step, context) : null);
  return step.onRequest(ctx);
}

export function proxy_on_response(replySize: i32, flags: i32, context: i32): i32 {
  ctx.reset(Phase.Response, replySize, flags);
  setSubopsTimed((flags & CallFlag.TimeSubops) != 0);
  const step = currentStep();
  const c = context >= 0 ? contextFor(step, context) : null;
  setRequest(c);
  const rc = step.onResponse(ctx);
  if (c !== null) c.onDone();
  return rc;
}

/** The host ended request `context` without its response callback. */
export function proxy_on_request_done(context: i32): void {
  const open = contexts;
  if (open === null || context < 0 || context >= open.length) return;
  const c = unchecked(open[context]);
  if (c !== null) c.onDone();
}

/** ctx.request = c, without the GC write barrier when it is already c (always null for a step
 *  without contexts; the same object while one request at a time is in flight). */
// @ts-ignore: decorator
@inline function setRequest(c: RequestContext | null): void {
  if (changetype<usize>(ctx.request) != changetype<usize>(c)) ctx.request = c;
}

/** The object of context number `n` (made on its first use). */
function contextFor(step: Step, n: i32): RequestContext | null {
  const open = contexts;
  if (open === null) return null;
  if (n >= open.length) open.length = n + 1;
  let c = unchecked(open[n]);
  if (c === null) {
    c = step.newRequestContext();
    unchecked(open[n] = c);
  }
  return c;
}
