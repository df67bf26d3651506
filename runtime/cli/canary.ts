// `proxy canary` (SPEC §4.3): a client of the canary control plane (docs/canary.md). Commands take a
// pipeline id where SPEC says so (status, promote, rollback) and find that pipeline's canary through
// GET /api/v1/canary; history and metrics take a canary id. Tables for people, --json (or
// `list --output json`) for machines. Errors print the API's code and message; exit codes in EXIT.
import type { CAC } from 'cac';
import { readFileSync, writeFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { CanaryCliError, CanaryClient, EXIT, usage } from './canary-client.ts';
import { ERRORS } from '../errors/catalogue.ts';
import { typedOption, endpointUrl } from './argv.ts';
import { fragmentFor, fragmentYaml, readPlain, writeFragment, type BaselineAnswer } from './canary-adopt.ts';
import { forTerminal } from '../log/index.ts';
import { isRunning, num, renderDiffs, renderHistory, renderStatus, table, type Diffs, type History, type Report, type Side,
  type Status } from './canary-render.ts';

const DEFAULT_URL = 'http://127.0.0.1:9092';
const WATCH_INTERVAL_MS = 5000;
const ACTIONS = ['start', 'status', 'promote', 'rollback', 'list', 'history', 'metrics', 'adopt', 'diffs'] as const;
type Action = typeof ACTIONS[number];

interface Options {
  url?: unknown; token?: unknown; json?: boolean;
  pipeline?: unknown; candidateConfig?: unknown; traffic?: unknown; autoPromote?: boolean; stages?: unknown;
  rollbackRules?: unknown; description?: unknown; verbose?: boolean; watch?: boolean; force?: boolean;
  reason?: unknown; all?: boolean; output?: unknown; format?: unknown;
  matchApp?: unknown; matchUser?: unknown; matchClient?: unknown; sticky?: unknown; write?: boolean; config?: unknown; shadow?: unknown;
  shadowUpstreamReads?: boolean;
}

/** Options each action accepts (besides --url, --token, --json). */
const ACTION_OPTIONS: Record<Action, string[]> = {
  start: ['pipeline', 'candidateConfig', 'traffic', 'autoPromote', 'stages', 'rollbackRules', 'description', 'matchApp', 'matchUser', 'matchClient', 'sticky',
    'shadow', 'shadowUpstreamReads'],
  status: ['verbose', 'watch'],
  promote: ['force'],
  rollback: ['reason', 'all'],
  list: ['output', 'all'],
  history: [],
  metrics: ['format', 'output'],
  adopt: ['write', 'config'],
  diffs: [],
};
const FLAG: Record<string, string> = {
  candidateConfig: '--candidate-config', autoPromote: '--auto-promote', rollbackRules: '--rollback-rules', shadowUpstreamReads: '--shadow-upstream-reads',
};

// ---- What the control plane answers (docs/canary.md) -----------------------------------------

interface ListItem { canary_id: string; pipeline_id: string; status: string; current_stage: number; traffic_pct: number; started_at: string;
  description?: string }

// ---- Helpers -----------------------------------------------------------------------------------

/** The option as typed: cac turns "007" into 7, which a token or an id must not become. */
function raw(name: string, parsed: unknown): string | undefined {
  if (parsed === undefined) return undefined;
  const typed = typedOption(name);
  if (typed !== undefined) return typed;
  if (parsed === true || parsed === false) return usage(`--${name} needs a value`);
  return String(parsed);
}

function baseUrl(given: string | undefined): string {
  const r = endpointUrl('url', given, 'PROXY_CONTROL_URL', DEFAULT_URL);
  return 'url' in r ? r.url : usage(r.problem);
}

/** A JSON or YAML file (by extension; JSON is also YAML). */
function readData(file: string, flag: string): unknown {
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch (err) { return usage(`${flag} ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no ' +
    'such file' : (err as Error).message}`); }
  try {
    return /\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    return usage(`${flag} ${file}: not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`);
  }
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

const out = (text: string) => { process.stdout.write(text); };
const printJson = (x: unknown) => out(`${JSON.stringify(x, null, 2)}\n`);

interface Ctx { client: CanaryClient; json: boolean; o: Options; target: string | undefined }

// ---- Finding a pipeline's canary ----------------------------------------------------------------

async function listAll(c: Ctx): Promise<ListItem[]> {
  const r = await c.client.json<{ canaries?: unknown }>('GET', '/api/v1/canary', undefined, { status: 'all' });
  // Another service at --url answers JSON too: what is not a canary list is said so, not misread.
  if (r === null || typeof r !== 'object' || !Array.isArray(r.canaries)) {
    throw new CanaryCliError('PROXY_ERR_CANARY_CLI_DATA', `GET /api/v1/canary at ${c.client.url} did not answer a canary list ` +
      '(is --url the proxy\'s control plane?)', ERRORS.PROXY_ERR_CANARY_CLI_DATA.exit);
  }
  return r.canaries as ListItem[];
}

const running = isRunning;

/** The pipeline's running canary; with `orLatest`, else its most recent one. */
async function canaryOf(c: Ctx, pipelineId: string, orLatest: boolean): Promise<ListItem> {
  const all = (await listAll(c)).filter((x) => x.pipeline_id === pipelineId);
  const found = all.find((x) => running(x.status)) ?? (orLatest ? all[0] : undefined);
  if (found === undefined) {
    const finished = all.length > 0 ? ` (its last canary ${all[0].canary_id} is ${all[0].status})` : '';
    throw new CanaryCliError('PROXY_ERR_CANARY_NOT_FOUND', `no ${orLatest ? '' : 'active or paused '}canary on pipeline "${pipelineId}"${finished}`,
      EXIT.notFound, null);
  }
  return found;
}

function needTarget(c: Ctx, what: string, action: Action): string {
  if (c.target === undefined || c.target === '') return usage(`proxy canary ${action} needs ${what}`);
  return c.target;
}

// ---- Commands ------------------------------------------------------------------------------------

async function start(c: Ctx): Promise<void> {
  const o = c.o;
  if (c.target !== undefined) usage(`proxy canary start takes no argument (got "${c.target}"); use --pipeline <pipeline_id>`);
  const pipeline = raw('pipeline', o.pipeline);
  if (pipeline === undefined) usage('proxy canary start needs --pipeline <pipeline_id>');
  const candidateFile = raw('candidate-config', o.candidateConfig);
  if (candidateFile === undefined) usage('proxy canary start needs --candidate-config <file>');
  const body: Record<string, unknown> = { pipeline_id: pipeline };
  const candidate = readData(candidateFile!, '--candidate-config');
  if (!isObject(candidate)) usage(`--candidate-config ${candidateFile}: expected an object with "steps" (the candidate_config of docs/canary.md)`);
  const cand = candidate as Record<string, unknown>;
  // The file is the candidate_config itself, or an object with candidate_config (and notifications).
  body.candidate_config = isObject(cand.candidate_config) ? cand.candidate_config : cand;
  if (isObject(cand.candidate_config) && cand.notifications !== undefined) body.notifications = cand.notifications;
  const traffic = raw('traffic', o.traffic);
  if (traffic !== undefined) {
    if (!/^\d+$/.test(traffic) || Number(traffic) > 100) usage(`--traffic must be an integer percentage 0..100, got "${traffic}"`);
    body.initial_traffic_pct = Number(traffic);
  }
  if (o.autoPromote === true) body.auto_promote = true;
  const stagesFile = raw('stages', o.stages);
  if (stagesFile !== undefined) {
    const s = readData(stagesFile, '--stages');
    const stages = isObject(s) ? s.stages : s;
    if (!Array.isArray(stages)) usage(`--stages ${stagesFile}: expected an array of stages, or an object with "stages"`);
    body.stages = stages;
  }
  const rulesFile = raw('rollback-rules', o.rollbackRules);
  if (rulesFile !== undefined) {
    const r = readData(rulesFile, '--rollback-rules');
    if (!isObject(r)) usage(`--rollback-rules ${rulesFile}: expected an object of rollback rules`);
    const rules = r as Record<string, unknown>;
    // Either the rollback_rules object itself, or { rollback_rules, auto_promote_rules }.
    if (isObject(rules.rollback_rules) || isObject(rules.auto_promote_rules)) {
      if (rules.rollback_rules !== undefined) body.rollback_rules = rules.rollback_rules;
      if (rules.auto_promote_rules !== undefined) body.auto_promote_rules = rules.auto_promote_rules;
    } else {
      body.rollback_rules = rules;
    }
  }
  const description = raw('description', o.description);
  if (description !== undefined) body.description = description;
  // Shadow canary (docs/canary.md, "Shadow canaries"): the candidate runs unseen beside the baseline on this share of requests.
  const shadow = raw('shadow', o.shadow);
  if (shadow !== undefined) {
    if (!/^\d+$/.test(shadow) || Number(shadow) < 1 || Number(shadow) > 100) usage(`--shadow must be an integer percentage 1..100, got "${shadow}"`);
    body.mode = 'shadow';
    body.shadow_pct = Number(shadow);
  }
  if (o.shadowUpstreamReads === true) {
    if (shadow === undefined) usage('--shadow-upstream-reads needs --shadow <pct>');
    body.shadow_upstream_reads = true;
  }
  // Aimed canary (docs/canary.md, "Aimed canaries"): each --match-* may be repeated.
  const many = (name: string, x: unknown): string[] | undefined => (x === undefined ? undefined : (Array.isArray(x) ? x : [x]).map((v) => {
    if (v === true || v === false) usage(`--${name} needs a value`);
    return String(v);
  }));
  const match: Record<string, string[]> = {};
  for (const [key, name, x] of [['app_name', 'match-app', o.matchApp], ['user', 'match-user', o.matchUser],
    ['client', 'match-client', o.matchClient]] as const) {
    const values = many(name, x);
    if (values !== undefined) match[key] = values;
  }
  if (Object.keys(match).length > 0) body.match = match;
  const sticky = raw('sticky', o.sticky);
  if (sticky !== undefined) {
    if (sticky !== 'connection' && sticky !== 'session') usage(`--sticky is connection or session, got "${sticky}"`);
    body.sticky = sticky;
  }
  const answer = await c.client.json<Record<string, unknown>>('POST', '/api/v1/canary', body);
  if (c.json) return printJson(answer);
  const r = forTerminal(answer);
  out(`canary ${String(r.canary_id)} started on pipeline ${String(r.pipeline_id)}: stage ${String(r.current_stage)}, ${String(r.traffic_pct)}% to ` +
    `the candidate${shadow !== undefined ? `, ${shadow}% shadowed` : ''}\n`
    + `  baseline  ${String(r.baseline_version)}\n  candidate ${String(r.candidate_version)}\n`
    + `  metrics   ${String(r.metrics_url)}\n`
    + `follow it with: proxy canary status ${String(r.pipeline_id)} --watch\n`);
}

async function status(c: Ctx): Promise<void> {
  const pipelineId = needTarget(c, 'a <pipeline_id>', 'status');
  const verbose = c.o.verbose === true;
  const once = async (): Promise<{ s: Status; report: Report | null }> => {
    const item = await canaryOf(c, pipelineId, true);
    const path = `/api/v1/canary/${encodeURIComponent(item.canary_id)}`;
    const s = await c.client.json<Status>('GET', path);
    // A finished canary: when and how it ended come from its report.
    const report = c.json || running(s.status) ? null : await c.client.json<Report>('GET', `${path}/report`);
    return { s, report };
  };
  if (c.o.watch !== true) {
    const { s, report } = await once();
    return c.json ? printJson(s) : out(renderStatus(s, verbose, Date.now(), report));
  }
  // --watch: redraw every 5 s until Ctrl-C; stop by itself once the canary is finished.
  const tty = process.stdout.isTTY === true && !c.json;
  for (;;) {
    const { s, report } = await once();
    if (c.json) out(`${JSON.stringify(s)}\n`);
    else out(`${tty ? '\x1b[2J\x1b[H' : ''}${new Date().toISOString()}  (every ${WATCH_INTERVAL_MS / 1000} s, Ctrl-C to ` +
      `stop)\n${renderStatus(s, verbose, Date.now(), report)}${tty ? '' : '\n'}`);
    if (!running(s.status)) return;
    await new Promise((r) => setTimeout(r, WATCH_INTERVAL_MS));
  }
}

async function promote(c: Ctx): Promise<void> {
  const pipelineId = needTarget(c, 'a <pipeline_id>', 'promote');
  const item = await canaryOf(c, pipelineId, false);
  const body = c.o.force === true ? { force: true } : {};
  const answer = await c.client.json<Record<string, unknown>>('POST', `/api/v1/canary/${encodeURIComponent(item.canary_id)}/promote`, body);
  if (c.json) return printJson(answer);
  const r = forTerminal(answer);
  out(`canary ${String(r.canary_id)} on ${pipelineId}: stage ${String(r.previous_stage)} → ${String(r.current_stage)}, ${String(r.traffic_pct)}% ` +
    `to the candidate${r.status === 'completed' ? ' — completed: the candidate is the ' +
    'baseline' : ''}\n${r.message ? `  ${String(r.message)}\n` : ''}`);
}

async function rollback(c: Ctx): Promise<void> {
  const reason = raw('reason', c.o.reason);
  if (reason === undefined || reason.trim() === '') usage('proxy canary rollback needs --reason <text> (it is kept in the history and the report)');
  let items: ListItem[];
  if (c.o.all === true) {
    if (c.target !== undefined) usage('give either a <pipeline_id> or --all, not both');
    items = (await listAll(c)).filter((x) => running(x.status));
  } else {
    items = [await canaryOf(c, needTarget(c, 'a <pipeline_id> (or --all)', 'rollback'), false)];
  }
  const results: unknown[] = [];
  let failed: CanaryCliError | null = null;
  for (const item of items) {
    try {
      const r = await c.client.json<Record<string, unknown> & { final_metrics?: { baseline: Side; candidate: Side } }>(
        'POST', `/api/v1/canary/${encodeURIComponent(item.canary_id)}/rollback`, { reason });
      results.push(r);
      if (!c.json) {
        const f = r.final_metrics;
        const t: Record<string, unknown> = forTerminal({ ...r, canary_id: item.canary_id, pipeline_id: item.pipeline_id });
        out(`canary ${String(t.canary_id)} on ${String(t.pipeline_id)}: rolled back at ${String(t.rolled_back_at)} (${String(t.triggered_by)}): ` +
          `${String(t.reason)}\n`
          + (f ? `  final: baseline ${f.baseline.requests} requests, ${num(f.baseline.error_rate_pct, 3)}% errors, ` +
            `p95 ${num(f.baseline.latency_p95_ms)} ms; candidate ${f.candidate.requests} requests, ${num(f.candidate.error_rate_pct, 3)}% errors, ` +
            `p95 ${num(f.candidate.latency_p95_ms)} ms\n` : ''));
      }
    } catch (err) {
      if (!(err instanceof CanaryCliError) || c.o.all !== true) throw err;
      // --all goes on with the others and fails at the end.
      failed = err;
      results.push({ canary_id: item.canary_id, error: { code: err.code, message: err.message } });
      process.stderr.write(`proxy canary rollback: ${item.canary_id} on ${item.pipeline_id}: ${err.code}: ${err.message}\n`);
    }
  }
  if (c.json) printJson(c.o.all === true ? { rolled_back: results } : results[0]);
  else if (items.length === 0) out('no active or paused canary: nothing to roll back\n');
  if (failed !== null) process.exitCode = failed.exitCode;
}

async function list(c: Ctx): Promise<void> {
  if (c.target !== undefined) usage(`proxy canary list takes no argument (got "${c.target}")`);
  const format = raw('output', c.o.output);
  if (format !== undefined && format !== 'json' && format !== 'table') usage(`--output for list is json or table, got "${format}"`);
  const all = await listAll(c);
  const shown = c.o.all === true ? all : all.filter((x) => running(x.status));
  if (c.json || format === 'json') return printJson({ canaries: shown, total: shown.length });
  if (shown.length === 0) return out(c.o.all === true ? 'no canaries\n' : 'no active or paused canaries (--all includes completed and rolled-back ones)\n');
  out(table(['CANARY ID', 'PIPELINE', 'STATUS', 'STAGE', 'TRAFFIC', 'STARTED', 'DESCRIPTION'],
    forTerminal(shown).map((x) => [x.canary_id, x.pipeline_id, x.status, String(x.current_stage), `${x.traffic_pct}%`, x.started_at, x.description ?? ''])));
}

async function history(c: Ctx): Promise<void> {
  const id = needTarget(c, 'a <canary_id>', 'history');
  const h = await c.client.json<History>('GET', `/api/v1/canary/${encodeURIComponent(id)}/history`);
  if (c.json) return printJson(h);
  out(renderHistory(h));
}

async function metrics(c: Ctx): Promise<void> {
  const id = needTarget(c, 'a <canary_id>', 'metrics');
  const format = raw('format', c.o.format) ?? (c.json ? 'json' : 'csv');
  if (format !== 'csv' && format !== 'json') usage(`--format is csv or json, got "${format}"`);
  const file = raw('output', c.o.output);
  const text = await c.client.text('GET', `/api/v1/canary/${encodeURIComponent(id)}/metrics`, undefined, { format });
  if (file === undefined) return format === 'json' ? printJson(JSON.parse(text)) : out(text.endsWith('\n') ? text : `${text}\n`);
  try {
    writeFileSync(file, text);
  } catch (err) {
    usage(`--output ${file}: ${(err as Error).message}`);
  }
  const rows = format === 'csv' ? Math.max(0, text.trimEnd().split('\n').length - 1) : ((JSON.parse(text) as { samples?: unknown[] }).samples?.length ?? 0);
  process.stderr.write(`wrote ${file} (${format}, ${rows} ${format === 'csv' ? 'rows' : 'samples'})\n`);
}

async function adopt(c: Ctx): Promise<void> {
  const pipelineId = needTarget(c, 'a <pipeline_id>', 'adopt');
  const b = await c.client.json<BaselineAnswer>('GET', `/api/v1/canary/pipelines/${encodeURIComponent(pipelineId)}/baseline`);
  const file = raw('config', c.o.config);
  if (c.o.write === true && file === undefined) usage('proxy canary adopt --write needs --config <file> (the configuration file to write into)');
  if (b.source === 'file') {
    if (c.json) return printJson({ ...b, fragment: null });
    return out(`pipeline ${pipelineId} runs the steps of the configuration file (${b.version}): nothing to adopt\n`);
  }
  let doc: Record<string, unknown> = {};
  if (file !== undefined) {
    try {
      doc = readPlain(file);
    } catch (err) {
      usage(`--config ${file}: ${(err as Error).message}`);
    }
  }
  const f = fragmentFor(b, doc);
  if (c.json && c.o.write !== true) return printJson({ ...b, fragment: f.sets });
  const note = f.sharedWith.length > 0 ? `note: pipelines ${f.sharedWith.join(', ')} list ${f.changedSteps.join(', ')} from the top-level steps ` +
    `too; the fragment changes them for those pipelines as well\n` : '';
  if (c.o.write === true) {
    await writeFragment(file!, f);
    process.stderr.write(note);
    return out(`wrote the steps canary ${String(b.canary_id)} promoted on pipeline ${pipelineId} into ${file} ` +
      `(${f.sets.map((s) => s.path.join('.')).join(', ')}); a reload now finds the file matching what runs and retires the promotion\n`);
  }
  process.stderr.write(`# pipeline ${pipelineId} runs the baseline canary ${String(b.canary_id)} promoted at ${String(b.promoted_at)} ` +
    `(${b.version}), not the file's steps.\n# Put this in the configuration file (or run: proxy canary adopt ${pipelineId} --write --config ` +
    `<file>):\n${note}`);
  out(fragmentYaml(f, pipelineId));
}

async function diffs(c: Ctx): Promise<void> {
  const pipelineId = needTarget(c, 'a <pipeline_id>', 'diffs');
  const item = await canaryOf(c, pipelineId, true);
  const d = await c.client.json<Diffs>('GET', `/api/v1/canary/${encodeURIComponent(item.canary_id)}/diffs`);
  if (c.json) return printJson(d);
  out(renderDiffs(d));
}

const COMMANDS: Record<Action, (c: Ctx) => Promise<void>> = { start, status, promote, rollback, list, history, metrics, adopt, diffs };

export async function canaryCommand(action: string, target: string | undefined, o: Options): Promise<void> {
  if (!(ACTIONS as readonly string[]).includes(action)) usage(`unknown action "${action}" (one of ${ACTIONS.join(', ')})`);
  const a = action as Action;
  const allowed = new Set(['url', 'token', 'json', ...ACTION_OPTIONS[a]]);
  for (const [k, v] of Object.entries(o)) {
    if (k === '--' || k.includes('-') || v === undefined) continue;
    if (!allowed.has(k)) usage(`${FLAG[k] ?? `--${k}`} does not apply to proxy canary ${a}`);
  }
  const url = baseUrl(raw('url', o.url));
  const token = raw('token', o.token) ?? process.env.PROXY_CONTROL_TOKEN ?? process.env.PROXY_CONTROL_PLANE_TOKEN ?? '';
  const ctx: Ctx = { client: new CanaryClient(url, token === '' ? null : token), json: o.json === true, o, target };
  await COMMANDS[a](ctx);
}

export function registerCanary(cli: CAC): void {
  cli.command('canary <action> [target]', 'Canary deployments through the control plane: start, status <pipeline_id>, promote <pipeline_id>, ' +
    'rollback <pipeline_id>|--all, list, history <canary_id>, metrics <canary_id>, adopt <pipeline_id>, diffs <pipeline_id>')
    .option('--url <url>', `control-plane URL (default $PROXY_CONTROL_URL, else ${DEFAULT_URL})`)
    .option('--token <token>', 'bearer token (default $PROXY_CONTROL_TOKEN, else $PROXY_CONTROL_PLANE_TOKEN)')
    .option('--json', 'machine-readable output (the API\'s JSON) on stdout')
    .option('--pipeline <pipeline_id>', 'start: the pipeline to canary')
    .option('--candidate-config <file>', 'start: the candidate_config (JSON or YAML)')
    .option('--traffic <pct>', 'start: traffic of the first stage, 0..100 (default: the first stage\'s)')
    .option('--auto-promote', 'start: promote automatically when the auto-promote conditions hold')
    .option('--stages <file>', 'start: stages (JSON or YAML array, or { stages: [...] })')
    .option('--rollback-rules <file>', 'start: rollback_rules (JSON or YAML; may hold rollback_rules and auto_promote_rules)')
    .option('--description <text>', 'start: shown in status, history and the rollback report')
    .option('--match-app <glob>', 'start: aim at clients whose appName matches (repeatable)')
    .option('--match-user <name>', 'start: aim at clients logged in as this user (repeatable)')
    .option('--match-client <cidr>', 'start: aim at clients from this address block (repeatable)')
    .option('--sticky <connection|session>', 'start: keep a connection\'s or a session\'s requests on one version')
    .option('--shadow <pct>', 'start: a shadow canary — the candidate also runs, unseen, beside the baseline on this share of requests (1..100)')
    .option('--shadow-upstream-reads', 'start: with --shadow, send a read whose command differs upstream for the candidate too')
    .option('--write', 'adopt: write the fragment into --config <file> instead of printing it')
    .option('--config <file>', 'adopt: the configuration file (to place the fragment, and to write with --write)')
    .option('--verbose', 'status: every rollback rule and auto-promote condition with its current value, met or unmet')
    .option('--watch', 'status: refresh every 5 s until Ctrl-C or the canary finishes')
    .option('--force', 'promote: skip the stage\'s min_duration and min_requests checks')
    .option('--reason <text>', 'rollback: why (required; kept in the history and the report)')
    .option('--all', 'rollback: every active or paused canary; list: include completed and rolled-back canaries')
    .option('--output <file|json>', 'list: json; metrics: the file to write (default stdout)')
    .option('--format <fmt>', 'metrics: csv (default) or json')
    .action(async (action: string, target: unknown, o: Options) => {
      process.stdout.on('error', (err: NodeJS.ErrnoException) => { if (err.code === 'EPIPE') process.exit(0); throw err; });
      try {
        await canaryCommand(String(action), target === undefined ? undefined : rawPositional(target), o);
      } catch (err) {
        if (!(err instanceof CanaryCliError)) throw err;
        const prefix = err.exitCode === EXIT.usage ? '' : `${err.status !== null ? `${err.status} ` : ''}${err.code}: `;
        process.stderr.write(`proxy canary ${String(action)}: ${prefix}${err.message}\n`);
        process.exit(err.exitCode);
      }
    });
}

/** A positional argument as typed (cac turns "0042" into 42). */
function rawPositional(parsed: unknown): string {
  const s = String(parsed);
  const i = process.argv.indexOf('canary');
  if (i >= 0) {
    const typed = process.argv.slice(i + 2).find((a) => !a.startsWith('-') && Number(a) === Number(parsed) && String(parsed) !== a);
    if (typed !== undefined && typeof parsed === 'number') return typed;
  }
  return s;
}
