// Which graph of a pipeline a request runs on: the baseline, or a canary's candidate beside it.
// Defined here, in the lowest layer, because the plugin host (metric labels, kv stores), the
// pipeline (GraphKey) and the configuration (reserved pipeline ids) all name it.
//
// The public API calls this `pipeline` — the `pipeline=` query and `--pipeline` flag, the
// `pipeline` metric label and profile field, the `proxy.pipeline` span attribute — a name from
// before several pipelines had a `pipeline_id`. Those names are the contract and stay; the code
// says Variant.

export const VARIANTS = ['baseline', 'candidate'] as const;
export type Variant = (typeof VARIANTS)[number];

export function isVariant(s: string): s is Variant {
  return s === 'baseline' || s === 'candidate';
}
