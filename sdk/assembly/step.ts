import { Context } from "./context";
import { RequestContext } from "./request";
import { Action, Phases } from "./host";

/** Base class of a plugin step: override what you need, everything else is a no-op. */
export class Step {
  /** The phases whose callback does something, read after onConfigure accepts (so it may depend
   *  on the config). The host does not call the step in a phase left out, even when the pipeline
   *  lists it there: set it when a callback is a no-op. Default: both. */
  phases: i32 = Phases.Both;

  /** Called once with the step's `config` object as JSON text. Return false to refuse it:
   *  the pipeline then does not load. */
  onConfigure(config: string): bool { return true; }
  onRequest(ctx: Context): Action { return Action.Continue; }
  /** A step that keeps state from a request to its response returns a new RequestContext
   *  subclass here (called once at configure, then whenever no ended one is left to reuse):
   *  `ctx.request` is then that request's object in both callbacks. Default: none. */
  newRequestContext(): RequestContext | null { return null; }
  onResponse(ctx: Context): Action { return Action.Continue; }
}

let registered: Step | null = null;

/** Register the plugin's step (call once, at top level of the plugin's index.ts). */
export function registerStep(step: Step): void { registered = step; }

export function currentStep(): Step {
  let s = registered;
  if (s === null) { s = new Step(); registered = s; }
  return s;
}
