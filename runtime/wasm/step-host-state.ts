// Host-side state one plugin instance needs whatever its kind (core module or component): the
// metrics it defined (updated by id), its open sub-operations (timed for the recorder) and its
// structured log records.
import { LOG_LEVEL_NAMES, type MetricKind } from './abi.ts';
import type { BoundMetric } from './plugin-metrics.ts';
import type { PluginServices } from './plugin-instance.ts';

export class StepHostState {
  private readonly services: PluginServices;
  private readonly metrics: BoundMetric[] = [];
  private readonly subopNames: string[] = [];
  private readonly subopStarts: bigint[] = [];
  /** `"step":…,"pipeline":…,` — the members the host puts before a plugin's log record. */
  private readonly recordPrefix: string;

  constructor(services: PluginServices) {
    this.services = services;
    this.recordPrefix = `"step":${JSON.stringify(services.step)},"pipeline":${JSON.stringify(services.pipelineId)},"graph":${JSON.stringify(services.variant)},`;
  }

  /**
   * A structured log record: `members` is UTF-8 JSON object members (`"k":v,...`) that the logger
   * writes as fields of its own line without re-encoding them (valid during the call only). A
   * record that is not plausibly members (must start with `"`, no raw newline, which would split
   * the line) is logged as a plain message instead.
   */
  logRecord(level: number, members: Uint8Array): void {
    const name = LOG_LEVEL_NAMES[level] ?? 'info';
    const logger = this.services.logger;
    if (logger.record !== undefined && members.length > 0 && members[0] === 0x22 && members.indexOf(0x0a) < 0) {
      logger.record(name, this.recordPrefix, members);
      return;
    }
    logger[name]({ step: this.services.step, pipeline: this.services.pipelineId }, utf8.decode(members));
  }

  /** Returns the metric's id, or -1 when refused (bad name, or the name exists with another kind). */
  defineMetric(kind: MetricKind, name: string): number {
    const m = this.services.metrics.define(kind, name, this.services.pipelineId, this.services.variant);
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

const utf8 = new TextDecoder();
