// The slot of a WebAssembly component step: the same lifecycle and crash-loop policy as a core
// module (InstanceSlot in plugin-slot.ts); instances are rebuilt synchronously after a trap from the
// compiled core modules jco split out (metered and memory-capped, see component-compile.ts).
import { InstanceSlot } from './plugin-slot.ts';
import { ComponentInstance } from './component-instance.ts';
import { ConfigureNotes, PluginConfigRefusedError } from './errors.ts';
import type { CompiledComponent } from './component-compile.ts';
import type { PluginServices } from './plugin-instance.ts';
import type { Logger } from './logger.ts';

export class ComponentSlot extends InstanceSlot {
  readonly component: CompiledComponent;

  /** Builds and configures the first instance; throws (load error / PluginConfigRefusedError). */
  constructor(component: CompiledComponent, services: PluginServices) {
    super(() => new ReasonedComponentInstance(component, services), services);
    this.component = component;
  }
}

/**
 * A component instance whose refusal carries the reason it logged while configuring (warn/error
 * lines), as a core module's does. The capture lasts only for configure(): afterwards the logger's
 * methods are the underlying logger's own, so later calls pay nothing for it.
 */
class ReasonedComponentInstance extends ComponentInstance {
  private readonly notes: ConfigureNotes;
  private readonly capturing: Logger;
  private readonly base: Logger;

  constructor(component: CompiledComponent, services: PluginServices) {
    const base = services.logger;
    const notes = new ConfigureNotes();
    const capture = (level: 'warn' | 'error') => (o: object, m: string): void => {
      notes.add(level, m);
      base[level](o, m);
    };
    const logger: Logger = {
      trace: base.trace.bind(base), debug: base.debug.bind(base), info: base.info.bind(base),
      warn: capture('warn'), error: capture('error'),
    };
    if (base.record !== undefined) logger.record = base.record.bind(base);
    super(component, { ...services, logger });
    this.notes = notes;
    this.capturing = logger;
    this.base = base;
  }

  override configure(): void {
    try {
      super.configure();
    } catch (err) {
      // A trap keeps its own message (it has a cause); a plain refusal gets the logged reason.
      if (err instanceof PluginConfigRefusedError && err.cause === undefined) {
        throw new PluginConfigRefusedError(this.services.step, this.notes.reason('configure returned false'));
      }
      throw err;
    } finally {
      this.capturing.warn = this.base.warn.bind(this.base);
      this.capturing.error = this.base.error.bind(this.base);
    }
  }
}
