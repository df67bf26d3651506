// Host-side state one plugin instance needs whatever its kind (core module or component): the
// metrics it defined (updated by id) and its open sub-operations (timed for the recorder).
import type { MetricKind } from './abi.ts';
import { definePluginMetric, type BoundMetric } from './plugin-metrics.ts';
import type { PluginServices } from './plugin-instance.ts';

export class StepHostState {
  private readonly services: PluginServices;
  private readonly metrics: BoundMetric[] = [];
  private readonly subopNames: string[] = [];
  private readonly subopStarts: bigint[] = [];

  constructor(services: PluginServices) {
    this.services = services;
  }

  /** Returns the metric's id, or -1 when refused (bad name, or the name exists with another kind). */
  defineMetric(kind: MetricKind, name: string): number {
    const m = definePluginMetric(kind, name, this.services.pipelineId);
    if (m === null) {
      this.services.logger.warn({ step: this.services.step, metric: name }, 'plugin metric refused (name must be proxy_plugin_*, one kind per name)');
      return -1;
    }
    this.metrics.push(m);
    return this.metrics.length - 1;
  }

  increment(id: number, delta: number): void {
    const m = this.metrics[id];
    if (m !== undefined) m.inc(delta);
  }

  record(id: number, value: number): void {
    const m = this.metrics[id];
    if (m !== undefined) m.record(value);
  }

  /** Whether sub-operations are recorded at all (with the recorder off, begin/end are no-ops). */
  get timesSubops(): boolean {
    return this.services.subop !== null;
  }

  subopBegin(name: string): void {
    this.subopNames.push(name);
    this.subopStarts.push(process.hrtime.bigint());
  }

  subopEnd(phase: 0 | 1): void {
    const start = this.subopStarts.pop();
    const name = this.subopNames.pop();
    const sink = this.services.subop;
    if (start === undefined || name === undefined || sink === null) return;
    sink(name, phase, Number(process.hrtime.bigint() - start));
  }
}
