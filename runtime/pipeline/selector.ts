// Which graph of a pipeline serves one request. With no candidate loaded the baseline serves
// everything and no selector is consulted; while a canary runs, its splitter (canary/) implements
// GraphSelector and is asked once per request — per request, not per connection (DESIGN.md §3).
// It is given who sent the request and the command (with the offset of its `lsid`, -1 when none),
// so an aimed canary can send chosen clients or sessions to the candidate; the plain split ignores
// both.
import type { Pipeline } from './pipeline.ts';
import type { ConnectionInfo } from './exchange.ts';

export interface GraphSelector {
  /** Returns `baseline` or `candidate`; called on the request path, so it must be cheap and must not throw. */
  select(baseline: Pipeline, candidate: Pipeline, conn: ConnectionInfo, body: Uint8Array, lsidAt: number): Pipeline;
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
