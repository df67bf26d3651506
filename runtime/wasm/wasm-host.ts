// Everything the plugin host keeps beyond one graph, owned by one object instead of module-level
// singletons (STYLE.md 12): two proxies in one process, or a test beside a proxy, share nothing.
// The PipelineManager owns one; graphs built by it get their state from it, keyed by graph. Metric
// names, help and labels come from the metric table (runtime/metrics/table.ts).
//   registry        the prom-client registry the host's metrics go in: the proxy's one registry
//                   (startProxy gives it; every /metrics reads it), or a registry of its own
//   pluginMetrics   the `proxy_plugin_*` families, one series per graph
//   stepErrors      proxy_step_errors_total{pipeline_id, pipeline, step, phase}
//   instanceRebuilds proxy_step_instance_rebuilds_total{pipeline_id, pipeline, step}
//   modules         compiled core modules by content hash + metering settings (bounded)
//   components      loaded components likewise (bounded)
//   kv              host-side key/value stores, by graph variant, step and config (see kv-stores.ts)
import { Counter, Registry } from 'prom-client';
import { promOptions } from '../metrics/index.ts';
import { PluginMetricRegistry } from './plugin-metrics.ts';
import { BoundedCache } from './bounded-cache.ts';
import { KvStores } from './kv-stores.ts';

/** Compiled modules (and loaded components) kept per host. */
export const MAX_CACHED_MODULES = 64;

export class WasmHost {
  readonly registry: Registry;
  readonly pluginMetrics: PluginMetricRegistry;
  readonly stepErrors: Counter<'pipeline_id' | 'pipeline' | 'step' | 'phase'>;
  readonly instanceRebuilds: Counter<'pipeline_id' | 'pipeline' | 'step'>;
  readonly modules = new BoundedCache<string, Promise<WebAssembly.Module>>(MAX_CACHED_MODULES);
  readonly components = new BoundedCache<string, Promise<unknown>>(MAX_CACHED_MODULES);
  readonly kv = new KvStores();

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    this.pluginMetrics = new PluginMetricRegistry(registry);
    this.stepErrors = new Counter({ ...promOptions('proxy_step_errors_total'), registers: [registry] });
    this.instanceRebuilds = new Counter({ ...promOptions('proxy_step_instance_rebuilds_total'), registers: [registry] });
  }
}
