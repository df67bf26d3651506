// The lifecycle of one step's instance: build, call, and after a trap discard and rebuild from the
// compiled module (a trapped AssemblyScript instance may have a broken stack pointer, and jco marks
// a trapped component instance unusable: never reuse either). Crash loops are rate-limited:
// CRASH_LIMIT traps inside CRASH_WINDOW_MS disable the step for a backoff period (1 s doubling to
// 60 s, like Envoy's FAIL_RELOAD backoff) during which calls fail immediately and the executor
// applies the step's on_error policy. Core modules and components share this policy; only the
// instance type differs.
import { PluginInstance, type PluginServices } from './plugin-instance.ts';
import type { CompiledPlugin } from './compile.ts';
import type { HostExchange } from './host-exchange.ts';
import type { KvStore } from './kv-store.ts';
import { Phase, type PhaseMask } from './abi.ts';

/** Returned by call() when the step could not run (trap, fuel, disabled). */
export const CALL_FAILED = -1;

export const CRASH_LIMIT = 5;
export const CRASH_WINDOW_MS = 10_000;
export const BACKOFF_MIN_MS = 1_000;
export const BACKOFF_MAX_MS = 60_000;

/** One live plugin instance (a core module's or a component's). */
export interface SlotInstance {
  /** Hands the step its config; throws when refused. */
  configure(): void;
  /** The phases the step acts in, known after configure(). */
  readonly phases: PhaseMask;
  callRequest(ex: HostExchange): number;
  callResponse(ex: HostExchange): number;
}

/** What the pipeline's StepRunner and the tests use of a slot. */
export interface StepSlot {
  call(ex: HostExchange, phase: Phase): number;
  /** The phases the step declared when configured: a phase it leaves out is not called at all. */
  readonly phases: PhaseMask;
  readonly traps: number;
  readonly rebuilds: number;
  readonly lastError: string;
  readonly disabled: boolean;
  readonly live: boolean;
  /** The step's host-side kv store in its graph. */
  readonly kv: KvStore;
}

export class InstanceSlot implements StepSlot {
  readonly services: PluginServices;

  get kv(): KvStore {
    return this.services.kv;
  }

  private readonly create: () => SlotInstance;
  private instance: SlotInstance | null;
  /** Traps since load (all causes). */
  traps: number;
  rebuilds: number;
  lastError: string;
  readonly phases: PhaseMask;
  private disabledUntil: number;
  private backoffMs: number;
  private windowStart: number;
  private windowTraps: number;
  private lastTrapAt: number;

  /** Builds and configures the first instance; throws (load error / config refused). */
  constructor(create: () => SlotInstance, services: PluginServices) {
    this.create = create;
    this.services = services;
    this.traps = 0;
    this.rebuilds = 0;
    this.lastError = '';
    this.disabledUntil = 0;
    this.backoffMs = BACKOFF_MIN_MS;
    this.windowStart = 0;
    this.windowTraps = 0;
    this.lastTrapAt = 0;
    const inst = create();
    inst.configure();
    this.instance = inst;
    this.phases = inst.phases;
  }

  get disabled(): boolean { return this.disabledUntil > 0 && performance.now() < this.disabledUntil; }
  get live(): boolean { return this.instance !== null; }

  /** Runs the phase callback; returns the plugin's Action (0 continue, 1 stop) or CALL_FAILED. Never throws. */
  call(ex: HostExchange, phase: Phase): number {
    let inst = this.instance;
    if (inst === null) {
      inst = this.rebuild();
      if (inst === null) return CALL_FAILED;
    }
    try {
      return (phase === Phase.Request ? inst.callRequest(ex) : inst.callResponse(ex)) === 0 ? 0 : 1;
    } catch (err) {
      this.trapped(err);
      return CALL_FAILED;
    }
  }

  private rebuild(): SlotInstance | null {
    const now = performance.now();
    if (now < this.disabledUntil) return null;
    try {
      const inst = this.create();
      inst.configure();
      this.instance = inst;
      this.rebuilds++;
      this.services.rebuilds.inc();
      return inst;
    } catch (err) {
      this.trapped(err);
      return null;
    }
  }

  private trapped(err: unknown): void {
    this.instance = null;
    this.traps++;
    this.lastError = err instanceof Error ? err.message : String(err);
    const now = performance.now();
    if (now - this.lastTrapAt > BACKOFF_MAX_MS) this.backoffMs = BACKOFF_MIN_MS;
    this.lastTrapAt = now;
    if (now - this.windowStart > CRASH_WINDOW_MS) {
      this.windowStart = now;
      this.windowTraps = 0;
    }
    this.windowTraps++;
    const log = this.services.logger;
    if (this.windowTraps >= CRASH_LIMIT) {
      this.disabledUntil = now + this.backoffMs;
      log.error('plugin crash loop: step disabled for the backoff period',
        { step: this.services.step, pipeline: this.services.pipelineId, backoff_ms: this.backoffMs, err: this.lastError });
      this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS);
      this.windowTraps = 0;
      this.windowStart = now;
    } else {
      log.warn('plugin trapped; instance discarded and will be rebuilt',
        { step: this.services.step, pipeline: this.services.pipelineId, err: this.lastError });
    }
  }
}

/** The slot of a core WebAssembly module step. */
export class PluginSlot extends InstanceSlot {
  readonly plugin: CompiledPlugin;
  constructor(plugin: CompiledPlugin, services: PluginServices) {
    super(() => new PluginInstance(plugin, services), services);
    this.plugin = plugin;
  }
}
