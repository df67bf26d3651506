// The pipelines a configuration defines, in the order requests try them: every `pipelines` entry,
// then the `pipeline` block as the default (unless an entry has its id and takes its place). And the
// checks across entries the schema runs at load: unique ids, one default, no pipeline that can
// never match (an earlier one's match covers its own).
import { matchCovers, valuesOf, MATCH_KEYS, type MatchSpec } from './pipeline-match.ts';
import { VARIANTS } from './variant.ts';

/** One pipeline as the runtime needs it: id, match (empty: everything) and the steps of each phase. */
export interface PipelineEntry {
  readonly id: string;
  readonly match: MatchSpec;
  readonly request: string[];
  readonly response: string[];
  /** Step settings of this pipeline only (laid over the top-level `steps` by name). */
  readonly steps: Readonly<Record<string, unknown>> | undefined;
}

/** Ids a pipeline may not take: they name a graph's variant (`proxy profile --pipeline candidate`). */
export const RESERVED_PIPELINE_IDS: ReadonlySet<string> = new Set(VARIANTS);

interface ListConfig {
  pipeline: { id: string; request: string[]; response: string[] };
  pipelines?: ReadonlyArray<{ id: string; match?: MatchSpec; request: string[]; response: string[]; steps?: Record<string, unknown> }>;
}

/** Whether a match restricts anything (a missing or empty match takes every request). */
export function matchesAll(match: MatchSpec | undefined): boolean {
  return match === undefined || MATCH_KEYS.every((k) => valuesOf(match[k]).length === 0);
}

/** The id of the pipeline requests no other pipeline matches go to. */
export function defaultPipelineId(cfg: ListConfig): string {
  return cfg.pipeline.id;
}

/**
 * Every pipeline, in matching order; the last is the default (the `pipeline` block, or the
 * `pipelines` entry with its id, moved last). With no `pipelines`, the one `pipeline`.
 */
export function pipelineEntries(cfg: ListConfig): PipelineEntry[] {
  const out: PipelineEntry[] = [];
  const defaultId = defaultPipelineId(cfg);
  let dflt: PipelineEntry = { id: defaultId, match: {}, request: cfg.pipeline.request, response: cfg.pipeline.response, steps: undefined };
  for (const p of cfg.pipelines ?? []) {
    const e: PipelineEntry = { id: p.id, match: p.match ?? {}, request: p.request, response: p.response, steps: p.steps };
    if (p.id === defaultId) dflt = e;
    else out.push(e);
  }
  out.push(dflt);
  return out;
}

export interface ListProblem {
  /** Key path below the root, e.g. `['pipelines', 2, 'match']`. */
  path: (string | number)[];
  message: string;
}

/** What is wrong across the pipelines (each entry's own keys are already valid). */
export function pipelineListProblems(cfg: ListConfig): ListProblem[] {
  const list = cfg.pipelines ?? [];
  const problems: ListProblem[] = [];
  const defaultId = defaultPipelineId(cfg);
  const seen = new Map<string, number>();
  list.forEach((p, i) => {
    if (RESERVED_PIPELINE_IDS.has(p.id)) problems.push({ path: ['pipelines', i, 'id'], message: `"${p.id}" names a graph variant and cannot be a ` +
      `pipeline id` });
    const first = seen.get(p.id);
    if (first !== undefined) problems.push({ path: ['pipelines', i, 'id'], message: `duplicate pipeline id "${p.id}" (also pipelines[${first}])` });
    else seen.set(p.id, i);
    if (p.id === defaultId) {
      if (!matchesAll(p.match)) problems.push({ path: ['pipelines', i, 'match'], message: `pipeline "${p.id}" is the default pipeline (it takes ` +
        `every request no other pipeline matches) and has no match; give this pipeline another id, or remove its match` });
      if (cfg.pipeline.request.length > 0 || cfg.pipeline.response.length > 0) {
        problems.push({ path: ['pipelines', i, 'id'], message: `pipeline "${p.id}" is defined twice: here and by the pipeline block's steps; list ` +
          `its steps in one place` });
      }
    }
  });
  if (RESERVED_PIPELINE_IDS.has(cfg.pipeline.id)) problems.push({ path: ['pipeline', 'id'], message: `"${cfg.pipeline.id}" names a graph variant ` +
    `and cannot be a pipeline id` });
  // Shadowing, in matching order (the default entry, wherever listed, is tried last).
  const order = list.map((p, i) => ({ p, i })).filter((x) => x.p.id !== defaultId);
  for (let b = 0; b < order.length; b++) {
    for (let a = 0; a < b; a++) {
      const earlier = order[a].p.match ?? {};
      const later = order[b].p.match ?? {};
      if (!matchCovers(earlier, later)) continue;
      const how = matchesAll(earlier) ? 'has no match (it takes every request)' : 'matches every request this one matches';
      problems.push({ path: ['pipelines', order[b].i, 'match'], message: `pipeline "${order[b].p.id}" can never match: pipelines[${order[a].i}] ` +
        `("${order[a].p.id}") comes first and ${how}` });
      break;
    }
  }
  // A catch-all entry also takes everything from the default pipeline, when that one has steps.
  const catchAll = order.find((x) => matchesAll(x.p.match));
  if (catchAll !== undefined) {
    const explicit = list.findIndex((p) => p.id === defaultId);
    const hasSteps = cfg.pipeline.request.length > 0 || cfg.pipeline.response.length > 0;
    if (explicit >= 0 || hasSteps) {
      problems.push({
        path: explicit >= 0 ? ['pipelines', explicit, 'id'] : ['pipeline'],
        message: `the default pipeline "${defaultId}" can never match: pipelines[${catchAll.i}] ("${catchAll.p.id}") has no match and takes every request`,
      });
    }
  }
  return problems;
}

type StepList<P> = { path: (string | number)[]; list: string[]; owner: P | null };

/** The step lists of each pipeline with their key paths and their `pipelines` entry (for the unknown-step check). */
export function stepLists<P extends { request: string[]; response: string[] }>(cfg: { pipeline: { request: string[]; response: string[] };
  pipelines?: readonly P[] }): StepList<P>[] {
  const out: StepList<P>[] = [];
  for (const phase of ['request', 'response'] as const) out.push({ path: ['pipeline', phase], list: cfg.pipeline[phase], owner: null });
  (cfg.pipelines ?? []).forEach((p, i) => {
    for (const phase of ['request', 'response'] as const) out.push({ path: ['pipelines', i, phase], list: p[phase], owner: p });
  });
  return out;
}
