// `proxy canary adopt <pipeline_id>`: the configuration fragment that makes the file say what a
// pipeline runs after a canary's promotion (GET /api/v1/canary/pipelines/{id}/baseline), printed,
// or written into the file with --write. The file keeps its format: YAML through the `yaml`
// library's document model (comments and layout of untouched keys kept), JSON re-indented as it
// was, TOML re-serialized (smol-toml keeps no comments). The fragment sets the pipeline's step
// order and every step whose settings the promotion changed; for an entry of `pipelines:` those
// steps go into the entry's own `steps`, so no other pipeline changes.
import { readFileSync, writeFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parseDocument, stringify as stringifyYaml } from 'yaml';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import { loadConfig } from '../config/index.ts';
import { usage } from './canary-client.ts';

interface GraphShape { pipeline: { request: string[]; response: string[] }; steps: Record<string, unknown> }

export interface BaselineAnswer {
  pipeline_id: string;
  source: 'file' | 'promotion';
  version: string;
  canary_id: string | null;
  promoted_at: string | null;
  config: GraphShape | null;
  file: GraphShape | null;
}

/** Where in the file a pipeline lives: the `pipeline` block, or entry `index` of `pipelines`. */
type Place = { kind: 'pipeline' } | { kind: 'pipelines'; index: number };

/** The key paths and values the fragment sets, in order. */
export interface Fragment {
  sets: Array<{ path: (string | number)[]; value: unknown }>;
  /** Steps that changed, and (for the top-level `steps`) other pipelines of the file that list them. */
  changedSteps: string[];
  sharedWith: string[];
}

const stripWasm = (s: string) => (s.startsWith('wasm:') ? s.slice(5) : s);
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function placeOf(doc: Record<string, unknown>, pipelineId: string): Place {
  const list = doc.pipelines;
  if (Array.isArray(list)) {
    const i = list.findIndex((e) => typeof e === 'object' && e !== null && (e as Record<string, unknown>).id === pipelineId);
    if (i >= 0) return { kind: 'pipelines', index: i };
  }
  return { kind: 'pipeline' };
}

/** The fragment for `b` (a promotion), placed as the file `doc` (a plain object of the file) has the pipeline. */
export function fragmentFor(b: BaselineAnswer, doc: Record<string, unknown>): Fragment {
  const promoted = b.config!;
  const file = b.file ?? { pipeline: { request: [], response: [] }, steps: {} };
  const place = placeOf(doc, b.pipeline_id);
  const base: (string | number)[] = place.kind === 'pipeline' ? ['pipeline'] : ['pipelines', place.index];
  const sets: Fragment['sets'] = [
    { path: [...base, 'request'], value: promoted.pipeline.request },
    { path: [...base, 'response'], value: promoted.pipeline.response },
  ];
  const listed = [...new Set([...promoted.pipeline.request, ...promoted.pipeline.response].map(stripWasm))];
  const changedSteps = listed.filter((n) => promoted.steps[n] !== undefined && !same(promoted.steps[n], file.steps[n]));
  const stepsBase: (string | number)[] = place.kind === 'pipeline' ? ['steps'] : ['pipelines', place.index, 'steps'];
  for (const n of changedSteps) sets.push({ path: [...stepsBase, n], value: promoted.steps[n] });
  // Top-level steps are shared: name the other pipelines of the file that list a changed step.
  const sharedWith: string[] = [];
  if (place.kind === 'pipeline' && Array.isArray(doc.pipelines)) {
    for (const e of doc.pipelines as Array<Record<string, unknown>>) {
      if (e.id === b.pipeline_id) continue;
      const steps = [...((e.request as string[]) ?? []), ...((e.response as string[]) ?? [])].map(stripWasm);
      const own = (e.steps ?? {}) as Record<string, unknown>;
      if (changedSteps.some((n) => steps.includes(n) && own[n] === undefined)) sharedWith.push(String(e.id));
    }
  }
  return { sets, changedSteps, sharedWith };
}

/**
 * The fragment as YAML for people (paths folded into nested keys). For an entry of `pipelines` it
 * is that entry's keys, under a comment naming the entry.
 */
export function fragmentYaml(f: Fragment, pipelineId = ''): string {
  const root: Record<string, unknown> = {};
  const entry = f.sets[0]?.path[0] === 'pipelines';
  for (const { path: full, value } of f.sets) {
    const path = entry ? full.slice(2) : full;
    let o: Record<string | number, unknown> = root;
    for (const k of path.slice(0, -1)) {
      if (o[k] === undefined) o[k] = {};
      o = o[k] as Record<string | number, unknown>;
    }
    o[path[path.length - 1]] = value;
  }
  return `${entry ? `# in the entry of pipelines whose id is ${pipelineId}\n` : ''}${stringifyYaml(root)}`;
}

function setPath(obj: Record<string, unknown>, path: (string | number)[], value: unknown): void {
  let o: Record<string | number, unknown> = obj;
  for (let i = 0; i < path.length - 1; i++) {
    const k = path[i];
    if (o[k] === undefined || o[k] === null || typeof o[k] !== 'object') o[k] = {};
    o = o[k] as Record<string | number, unknown>;
  }
  o[path[path.length - 1]] = value;
}

/** Reads the file as a plain object (for placing the fragment). */
export function readPlain(file: string): Record<string, unknown> {
  const text = readFileSync(file, 'utf8');
  const ext = extname(file).toLowerCase();
  const doc = ext === '.json' ? JSON.parse(text) : ext === '.toml' ? parseToml(text) : parseDocument(text).toJS();
  return (doc ?? {}) as Record<string, unknown>;
}

/** Writes the fragment into `file` in its own format, then loads it as the proxy would (refused: the file is put back). */
export async function writeFragment(file: string, f: Fragment): Promise<void> {
  const text = readFileSync(file, 'utf8');
  const ext = extname(file).toLowerCase();
  let out: string;
  if (ext === '.json') {
    const indent = /^[ \t]*\n?([ \t]+)"/m.exec(text.slice(text.indexOf('{') + 1))?.[1] ?? '  ';
    const obj = JSON.parse(text) as Record<string, unknown>;
    for (const s of f.sets) setPath(obj, s.path, s.value);
    out = `${JSON.stringify(obj, null, indent)}\n`;
  } else if (ext === '.toml') {
    const obj = parseToml(text) as Record<string, unknown>;
    for (const s of f.sets) setPath(obj, s.path, s.value);
    out = stringifyToml(obj);
  } else if (ext === '.yaml' || ext === '.yml') {
    const doc = parseDocument(text);
    for (const s of f.sets) doc.setIn(s.path, doc.createNode(s.value));
    out = doc.toString();
  } else {
    return usage(`--config ${file}: unsupported file extension "${ext}" (.json, .yaml, .yml or .toml)`);
  }
  writeFileSync(file, out);
  try {
    await loadConfig({ file });
  } catch (err) {
    writeFileSync(file, text);
    usage(`--config ${file}: the file with the fragment is refused, so it was left as it was: ${(err as Error).message}`);
  }
}
