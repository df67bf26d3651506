// custom_metrics rules read plugin metrics per graph (docs/canary.md): per window, a counter's
// increase per request of that graph (so the sides compare despite unequal traffic), a gauge's
// current value, a histogram's mean of the window's observations. NaN when there is no data.
import type { Variant } from '../pipeline/index.ts';
import type { CustomValues } from './evaluator.ts';
import type { CanaryMetricsSource, CustomReading } from './windows.ts';

interface Previous {
  readings: Record<Variant, CustomReading | null>;
  requests: Record<Variant, number>;
}

export class CustomMetricWindows {
  private readonly prev = new Map<string, Previous>();

  clear(): void {
    this.prev.clear();
  }

  /** `requests`: each graph's cumulative requests now (a counter's increase is divided by their increase). */
  async read(metrics: CanaryMetricsSource, pipelineId: string, rules: ReadonlyArray<{ metric: string }>, requests: Record<Variant,
    number>): Promise<CustomValues> {
    const out: CustomValues = new Map();
    if (rules.length === 0) return out;
    for (const rule of rules) {
      const [b, c] = await Promise.all([metrics.custom(rule.metric, pipelineId, 'baseline'), metrics.custom(rule.metric, pipelineId, 'candidate')]);
      const before = this.prev.get(rule.metric);
      const value = (side: Variant, now: CustomReading | null): number => {
        if (now === null) return NaN;
        const was = before?.readings[side] ?? null;
        if (now.kind === 'gauge') return now.value;
        if (now.kind === 'counter') {
          const n = requests[side] - (before?.requests[side] ?? 0);
          return n > 0 ? (now.value - (was?.value ?? 0)) / n : NaN;
        }
        const count = now.count - (was?.count ?? 0);
        return count > 0 ? (now.sum - (was?.sum ?? 0)) / count : NaN;
      };
      out.set(rule.metric, { baseline: value('baseline', b), candidate: value('candidate', c) });
      this.prev.set(rule.metric, { readings: { baseline: b, candidate: c }, requests });
    }
    return out;
  }
}
