// The ABI functions the host calls. A plugin re-exports them with one line:
//   export * from "<path>/sdk/assembly/exports";
import { Context } from "./context";
import { currentStep } from "./step";
import { proxy_set_phases, Phase } from "./host";

// The ABI version this plugin is built for, exported as a constant global the host reads at load.
export { proxy_abi_version } from "./abi";

const ctx = new Context();
// The buffer the host fills through proxy_alloc; kept reachable (GC) until the next call.
let hostBuf: ArrayBuffer | null = null;

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
  return 0;
}

export function proxy_on_request(bodySize: i32, flags: i32): i32 {
  ctx.reset(Phase.Request, bodySize, flags);
  return currentStep().onRequest(ctx);
}

export function proxy_on_response(replySize: i32, flags: i32): i32 {
  ctx.reset(Phase.Response, replySize, flags);
  return currentStep().onResponse(ctx);
}
