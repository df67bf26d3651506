// What the controller tests share: a clock the test moves, per-graph figures the test fills (real HDR
// histograms, as each arm's evidence keeps them) in place of the arms' own counts, and a controller
// over a real PipelineManager with the built-in plugins and a real SQLite store in a temporary
// directory.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { PipelineManager, type PipelineConfig, type Variant } from '../../runtime/pipeline/index.ts';
import {
  CanaryController, CanaryStore, PipelineCanaryGraphs, RecordingEventSink, defaultsFromConfig, emptyHistogram,
  type CanaryMetricsSource, type CustomReading, type GraphTotals,
} from '../../runtime/canary/index.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';

export class TestClock {
  t = Date.parse('2026-11-24T06:00:00.000Z');
  now(): number { return this.t; }
  advance(ms: number): void { this.t += ms; }
}

export class TestMetrics implements CanaryMetricsSource {
  private readonly graphs = new Map<string, GraphTotals>();
  readonly customs = new Map<string, CustomReading>();

  private graph(variant: Variant, pipelineId = 'default'): GraphTotals {
    const k = `${pipelineId}/${variant}`;
    let g = this.graphs.get(k);
    if (g === undefined) this.graphs.set(k, g = { requests: 0, errors: 0, latencyUs: emptyHistogram() });
    return g;
  }

  /** Records `n` requests on one graph, `errors` of them failed, each taking `latencyUs`. */
  feed(variant: Variant, n: number, errors: number, latencyUs = 1000, pipelineId = 'default'): void {
    const g = this.graph(variant, pipelineId);
    g.requests += n;
    g.errors += errors;
    if (n > 0) g.latencyUs.recordValueWithCount(latencyUs, n);
  }

  totals(pipelineId: string, variant: Variant): GraphTotals | null {
    return this.graphs.get(`${pipelineId}/${variant}`) ?? null;
  }

  async custom(metric: string, pipelineId: string, variant: Variant): Promise<CustomReading | null> {
    return this.customs.get(`${metric}/${pipelineId}/${variant}`) ?? null;
  }
}

/** The real graphs, with each arm's figures read from TestMetrics (what the test feeds). */
export class FedCanaryGraphs extends PipelineCanaryGraphs {
  private readonly fed: TestMetrics;

  constructor(manager: PipelineManager, baselines: PipelineConfig[], fed: TestMetrics) {
    super(manager, baselines);
    this.fed = fed;
  }

  override totals(pipelineId: string, variant: Variant): GraphTotals | null {
    return this.fed.totals(pipelineId, variant);
  }
}

export const BASELINE = { pipeline: { id: 'default', request: [] as string[], response: [] as string[] }, steps: {} };

export interface Harness {
  controller: CanaryController;
  clock: TestClock;
  metrics: TestMetrics;
  sink: RecordingEventSink;
  manager: PipelineManager;
  graphs: PipelineCanaryGraphs;
  store: CanaryStore;
  dir: string;
}

/** A controller without its own timer (the test calls evaluate()); `dir` reuses a store (a restart). */
export function harness(opts: { dir?: string; clock?: TestClock; metrics?: TestMetrics; config?: object; gracePeriodMs?: number } = {}): Harness {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'canary-test-'));
  const clock = opts.clock ?? new TestClock();
  const metrics = opts.metrics ?? new TestMetrics();
  const sink = new RecordingEventSink();
  const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR });
  const graphs = new FedCanaryGraphs(manager, [BASELINE], metrics);
  const store = new CanaryStore(dir);
  const config = parseConfig(opts.config ?? {}, null);
  const controller = new CanaryController({
    store, graphs, metrics, sink, defaults: () => defaultsFromConfig(config), clock, scheduler: null,
    warningShare: config.canary.warning_share, gracePeriodMs: opts.gracePeriodMs ?? 15 * 60_000,
  });
  return { controller, clock, metrics, sink, manager, graphs, store, dir };
}

/** A candidate that adds the logging step (it loads and changes nothing a client sees). */
export const LOGGING_CANDIDATE = { steps: [{ type: 'logging', config: {} }] };

export { hdr };
