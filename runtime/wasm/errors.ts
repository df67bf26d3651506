// Error classes of the wasm host, each with a stable code from the catalogue
// (runtime/errors/catalogue.ts). None of them crosses the data path: the executor turns step
// failures into a MongoDB error document or a skipped step.
import type { CodesOf } from '../errors/catalogue.ts';

export type WasmHostErrorCode = CodesOf<'WasmHostError'>;

export class WasmHostError extends Error {
  readonly code: WasmHostErrorCode;
  constructor(code: WasmHostErrorCode, message: string, cause?: unknown) {
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

/**
 * The warnings and errors a plugin logs while it configures: a plugin refuses a config by logging
 * why and returning false, so these lines are the reason PluginConfigRefusedError carries (at
 * startup, in the admin API's reload answer). Bounded: a chatty plugin cannot grow the message.
 */
export class ConfigureNotes {
  static readonly MAX_LINES = 5;
  static readonly MAX_CHARS = 1000;
  private readonly lines: string[] = [];

  /** Keeps `msg` when `level` is warn or error. */
  add(level: string, msg: string): void {
    if ((level === 'error' || level === 'warn') && this.lines.length < ConfigureNotes.MAX_LINES) this.lines.push(msg);
  }

  /** The logged reason, else `fallback` (e.g. "on_configure returned 1"). */
  reason(fallback: string): string {
    if (this.lines.length === 0) return fallback;
    const text = this.lines.join('; ');
    return text.length > ConfigureNotes.MAX_CHARS ? `${text.slice(0, ConfigureNotes.MAX_CHARS)}…` : text;
  }
}
