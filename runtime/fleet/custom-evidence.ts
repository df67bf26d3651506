// custom_metrics rules in a fleet: each instance serves, in its evidence, the cumulative reading of
// every plugin metric the canary's rules name, per graph (a counter's value, a gauge's value, a
// histogram's sum and count — summed over the plugin's labels, and over its workers, as on one
// instance). The evaluating instance turns each instance's readings into that instance's window and
// adds the windows up, so a rule reads the fleet's figures with the meaning it has on one instance
// (docs/canary.md "Custom metrics"):
//   counter   — the increase summed over the instances, divided by the same instances' requests of
//               that graph in the window (per request: the sides compare despite unequal traffic);
//   histogram — the window's observations' sum over their count, both summed: the fleet's mean;
//   gauge     — the instances' current values summed (a level per instance is not a window; summed
//               as the workers of one instance and the plugin's own label sets are).
// An instance's first reading of a counter or histogram only starts its window (its cumulative
// figures may predate the canary). A counter or count that went down (a restart, a new graph) is a
// new source: its window is what it holds now. NaN when no instance has data for a graph.
import type { Variant } from '../pipeline/index.ts';
import type { CustomValues } from '../canary/evaluator.ts';
import type { CanaryMetricsSource, CustomReading } from '../canary/windows.ts';

/** One plugin metric's cumulative readings on one instance, per graph (null: no series there). */
export type CustomPair = Record<Variant, CustomReading | null>;

/** The metrics a leader may ask one instance for at once (the query string stays bounded). */
export const MAX_CUSTOM_METRICS = 32;
const METRIC_NAME = /^proxy_plugin_[a-zA-Z0-9_]{1,200}$/;

/** The names of a `?custom=` query (comma-separated); throws a message naming what is wrong. */
export function parseCustomQuery(q: string | undefined): string[] {
  if (q === undefined || q === '') return [];
  const names = [...new Set(q.split(','))];
  if (names.length > MAX_CUSTOM_METRICS) throw new Error(`custom: at most ${MAX_CUSTOM_METRICS} metric names`);
  for (const n of names) if (!METRIC_NAME.test(n)) throw new Error(`custom: "${n.slice(0, 60)}" is not a plugin metric name (proxy_plugin_…)`);
  return names;
}

/** This instance's readings of `names` on pipeline `pipelineId`, both graphs. */
export async function readCustom(metrics: CanaryMetricsSource, pipelineId: string, names: readonly string[]): Promise<Record<string, CustomPair>> {
  const out: Record<string, CustomPair> = {};
  for (const name of names) {
    const [baseline, candidate] = await Promise.all([metrics.custom(name, pipelineId, 'baseline'), metrics.custom(name, pipelineId, 'candidate')]);
    out[name] = { baseline, candidate };
  }
  return out;
}

/** One instance run's previous readings, by metric. */
export type CustomPrevious = Map<string, CustomPair>;

/** Sums of one graph's window over the instances. */
class Acc {
  num = 0;
  den = 0;
  gauge = 0;
  kind: CustomReading['kind'] | null = null;

  value(): number {
    if (this.kind === 'gauge') return this.gauge;
    return this.den > 0 ? this.num / this.den : NaN;
  }
}

/** Adds up the instances' custom-metric windows (see the header for each kind's rule). */
export class CustomMerge {
  private readonly names: readonly string[];
  private readonly acc = new Map<string, Record<Variant, Acc>>();

  constructor(names: readonly string[]) {
    this.names = names;
    for (const n of names) this.acc.set(n, { baseline: new Acc(), candidate: new Acc() });
  }

  /**
   * One instance's readings now against its previous ones (updated in place); `requests`: that
   * instance's requests of each graph in the same window (a counter's denominator).
   */
  add(prev: CustomPrevious, now: Record<string, CustomPair> | undefined, requests: Record<Variant, number>): void {
    for (const name of this.names) {
      const cur = now?.[name];
      if (cur === undefined) continue;
      const was = prev.get(name);
      const acc = this.acc.get(name)!;
      for (const side of ['baseline', 'candidate'] as const) {
        const r = cur[side];
        const a = acc[side];
        if (r === null || (a.kind !== null && a.kind !== r.kind)) continue;
        if (r.kind === 'gauge') {
          a.kind = 'gauge';
          a.gauge += r.value;
          continue;
        }
        const w = was?.[side] ?? null;
        if (w === null || w.kind !== r.kind) continue;
        a.kind = r.kind;
        if (r.kind === 'counter') {
          a.num += r.value >= w.value ? r.value - w.value : r.value;
          a.den += requests[side];
        } else {
          const reset = r.count < w.count;
          a.num += reset ? r.sum : r.sum - w.sum;
          a.den += reset ? r.count : r.count - w.count;
        }
      }
      prev.set(name, cur);
    }
  }

  values(): CustomValues {
    const out: CustomValues = new Map();
    for (const [name, a] of this.acc) out.set(name, { baseline: a.baseline.value(), candidate: a.candidate.value() });
    return out;
  }
}
