// Which graph of a pipeline serves one request. With no candidate loaded the baseline serves
// everything and no selector is consulted; while a canary runs, its splitter (canary/) implements
// GraphSelector and is asked once per request — per request, not per connection (DESIGN.md §3).
import type { Pipeline } from './pipeline.ts';

export interface GraphSelector {
  /** Returns `baseline` or `candidate`; called on the request path, so it must be cheap and must not throw. */
  select(baseline: Pipeline, candidate: Pipeline): Pipeline;
}

/** SPEC §3's split: a uniform draw in [0, 100) below `trafficPct` goes to the candidate. */
export class PercentSelector implements GraphSelector {
  trafficPct: number;
  private readonly random: () => number;

  constructor(trafficPct: number, random: () => number = Math.random) {
    this.trafficPct = trafficPct;
    this.random = random;
  }

  select(baseline: Pipeline, candidate: Pipeline): Pipeline {
    return this.random() * 100 < this.trafficPct ? candidate : baseline;
  }
}
