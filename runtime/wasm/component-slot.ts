// The lifecycle of one component step's instance, with the PluginSlot contract (plugin-slot.ts):
// build + configure at load, call() returns the step's Action or CALL_FAILED and never throws,
// a trapped instance is discarded (jco marks a trapped component instance unusable) and rebuilt
// synchronously at the next call from the compiled core modules; crash loops use the same limits
// (CRASH_LIMIT traps in CRASH_WINDOW_MS disable the step for BACKOFF_MIN_MS doubling to
// BACKOFF_MAX_MS). No fuel: components are not metered.
import { CALL_FAILED, CRASH_LIMIT, CRASH_WINDOW_MS, BACKOFF_MIN_MS, BACKOFF_MAX_MS } from './plugin-slot.ts';
import { ComponentInstance } from './component-instance.ts';
import type { CompiledComponent } from './component-compile.ts';
import type { PluginServices } from './plugin-instance.ts';
import type { HostExchange } from './host-exchange.ts';
import { instanceRebuildsTotal } from './plugin-metrics.ts';

/** What the pipeline's StepRunner and the tests use of a slot (PluginSlot and ComponentSlot both have it). */
export interface StepSlot {
  call(ex: HostExchange, phase: 0 | 1): number;
  readonly traps: number;
  readonly rebuilds: number;
  readonly lastError: string;
  readonly disabled: boolean;
  readonly live: boolean;
}

export class ComponentSlot implements StepSlot {
  readonly kind = 'component';
  readonly component: CompiledComponent;
  readonly services: PluginServices;
  private instance: ComponentInstance | null;
  traps: number;
  rebuilds: number;
  lastError: string;
  private disabledUntil: number;
  private backoffMs: number;
  private windowStart: number;
  private windowTraps: number;
  private lastTrapAt: number;

  /** Builds and configures the first instance; throws (load error / PluginConfigRefusedError). */
  constructor(component: CompiledComponent, services: PluginServices) {
    this.component = component;
    this.services = services;
    this.traps = 0;
    this.rebuilds = 0;
    this.lastError = '';
    this.disabledUntil = 0;
    this.backoffMs = BACKOFF_MIN_MS;
    this.windowStart = 0;
    this.windowTraps = 0;
    this.lastTrapAt = 0;
    const inst = new ComponentInstance(component, services);
    inst.configure();
    this.instance = inst;
  }

  get disabled(): boolean { return this.disabledUntil > 0 && performance.now() < this.disabledUntil; }
  get live(): boolean { return this.instance !== null; }

  /** Runs the phase callback; returns the plugin's Action (0/1) or CALL_FAILED. Never throws. */
  call(ex: HostExchange, phase: 0 | 1): number {
    let inst = this.instance;
    if (inst === null) {
      inst = this.rebuild();
      if (inst === null) return CALL_FAILED;
    }
    try {
      const rc = phase === 0 ? inst.callRequest(ex) : inst.callResponse(ex);
      return rc === 0 ? 0 : 1;
    } catch (err) {
      this.trapped(err);
      return CALL_FAILED;
    }
  }

  private rebuild(): ComponentInstance | null {
    if (performance.now() < this.disabledUntil) return null;
    try {
      const inst = new ComponentInstance(this.component, this.services);
      inst.configure();
      this.instance = inst;
      this.rebuilds++;
      instanceRebuildsTotal.labels(this.services.pipelineId, this.services.step).inc();
      return inst;
    } catch (err) {
      this.trapped(err);
      return null;
    }
  }

  // Same policy and log lines as PluginSlot.trapped (plugin-slot.ts keeps it private; see the
  // report: extracting it into a shared helper needs a change to plugin-slot.ts).
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
      log.error({ step: this.services.step, pipeline: this.services.pipelineId, backoff_ms: this.backoffMs, err: this.lastError },
        'plugin crash loop: step disabled for the backoff period');
      this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS);
      this.windowTraps = 0;
      this.windowStart = now;
    } else {
      log.warn({ step: this.services.step, pipeline: this.services.pipelineId, err: this.lastError },
        'plugin trapped; instance discarded and will be rebuilt');
    }
  }
}
