// Error classes of the wasm host, each with a stable code. None of them crosses the data path:
// the executor turns step failures into a MongoDB error document or a skipped step.

export class WasmHostError extends Error {
  readonly code: string;
  constructor(code: string, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
    this.name = new.target.name;
  }
}

/** A module could not be read, instrumented, compiled or instantiated. */
export class PluginLoadError extends WasmHostError {
  constructor(step: string, reason: string, cause?: unknown) {
    super('PROXY_ERR_PLUGIN_LOAD', `plugin ${step}: ${reason}`, cause);
  }
}

/** on_configure returned non-zero (or trapped). */
export class PluginConfigRefusedError extends WasmHostError {
  constructor(step: string, detail: string, cause?: unknown) {
    super('PROXY_ERR_PLUGIN_CONFIG_REFUSED', `plugin ${step} refused its config: ${detail}`, cause);
  }
}

/** Thrown inside a host import to abort the plugin call (surfaces as a trap). */
export class PluginTrap extends WasmHostError {
  constructor(reason: string) {
    super('PROXY_ERR_PLUGIN_TRAP', reason);
  }
}

/** The per-call instruction budget ran out. */
export class FuelExhaustedError extends WasmHostError {
  constructor(step: string, fuel: number) {
    super('PROXY_ERR_PLUGIN_FUEL', `plugin ${step} exceeded its fuel budget (${fuel})`);
  }
}
