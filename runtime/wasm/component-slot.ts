// The slot of a WebAssembly component step: the same lifecycle and crash-loop policy as a core
// module (InstanceSlot in plugin-slot.ts); instances are rebuilt synchronously after a trap from the
// compiled core modules jco split out (metered and memory-capped, see component-compile.ts).
import { InstanceSlot } from './plugin-slot.ts';
import { ComponentInstance } from './component-instance.ts';
import type { CompiledComponent } from './component-compile.ts';
import type { PluginServices } from './plugin-instance.ts';

export class ComponentSlot extends InstanceSlot {
  readonly component: CompiledComponent;

  /** Builds and configures the first instance; throws (load error / PluginConfigRefusedError). */
  constructor(component: CompiledComponent, services: PluginServices) {
    super(() => new ComponentInstance(component, services), services);
    this.component = component;
  }
}
