// Public surface of the WebAssembly plugin host.
export * from './abi.ts';
export * from './errors.ts';
export { instrumentModule, capMemory } from './metering.ts';
export { readPluginFile, compilePluginFile, compilePluginBytes, type CompiledPlugin, type CompileOptions } from './compile.ts';
export { PluginInstance, type PluginServices, type SubopSink } from './plugin-instance.ts';
export { PluginSlot, InstanceSlot, type StepSlot, type SlotInstance, CALL_FAILED, CRASH_LIMIT, CRASH_WINDOW_MS, BACKOFF_MIN_MS,
  BACKOFF_MAX_MS } from './plugin-slot.ts';
export { KvStore, DEFAULT_KV_MAX_BYTES } from './kv-store.ts';
export { KvStores } from './kv-stores.ts';
export { PluginMetricRegistry, type BoundMetric } from './plugin-metrics.ts';
export { WasmHost, MAX_CACHED_MODULES } from './wasm-host.ts';
export { BoundedCache } from './bounded-cache.ts';
export { type HostExchange, type HostConnection, VERDICT_CONTINUE, VERDICT_REJECT, VERDICT_LOCAL_REPLY } from './host-exchange.ts';
export { type HostLog, defaultLogger } from './logger.ts';
export {
  isComponentHeader, compileComponentBytes,
  type CompiledComponent, type ComponentCompileOptions, type ComponentHostImports, type ComponentStepExports,
} from './component-compile.ts';
export { ComponentInstance } from './component-instance.ts';
export { ComponentSlot } from './component-slot.ts';
