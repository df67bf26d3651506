// The identity of one loaded pipeline graph: which pipeline, which variant (the baseline every
// request runs through, or a canary's candidate beside it), and which generation (bumped by each
// load of that pipeline and variant). Everything a graph owns — plugin instances, host-side kv
// stores, plugin metrics, error and rejection counters, recorder handles — is keyed by it and bound
// when the graph is built, so the request path never looks anything up by string.

import type { Variant } from '../config/index.ts';

export class GraphKey {
  readonly pipelineId: string;
  readonly variant: Variant;
  readonly generation: number;

  constructor(pipelineId: string, variant: Variant, generation: number) {
    this.pipelineId = pipelineId;
    this.variant = variant;
    this.generation = generation;
  }

  /** `default/baseline#3`: for logs and error messages. */
  toString(): string {
    return `${this.pipelineId}/${this.variant}#${this.generation}`;
  }
}
