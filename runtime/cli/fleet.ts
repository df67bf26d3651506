// `proxy fleet status`: the fleet as one instance's control plane sees it (GET /api/v1/fleet,
// docs/fleet.md): every registered instance by instance_id with what it serves, and the leader.
// `proxy fleet publish --config <file>`: that file's pipelines as the fleet's next generation
// (POST /api/v1/fleet/pipelines).
// Same URL, token and exit codes as `proxy canary` (docs/cli.md).
import type { CAC } from 'cac';
import { CanaryCliError, CanaryClient, EXIT, usage } from './canary-client.ts';
import { endpointUrl, typedOption } from './argv.ts';
import { readFileSync } from 'node:fs';
import { parseText } from '../config/index.ts';

const DEFAULT_URL = 'http://127.0.0.1:9092';

interface Instance {
  instance_id: string; address: string; control_url: string | null; version: string; workers: number; graph_generation: number;
  started_at: string; leader: boolean;
}
export interface FleetView {
  store: string; instance_id: string; leader: string | null; reachable: boolean; evaluating: boolean; fail_safe: boolean;
  store_unreachable_since: string | null; instances: Instance[];
}

/** The table people read. */
export function renderFleet(f: FleetView): string {
  const lines = [`fleet store ${f.store}; asked ${f.instance_id}; leader ${f.leader ?? '(none)'}; store ` +
    `${f.reachable ? 'reachable' : `UNREACHABLE since ${f.store_unreachable_since ?? '?'}`}${f.fail_safe ? '; FAIL-SAFE: all traffic to the baseline' : ''}`];
  const rows = [['INSTANCE', 'LEADER', 'ADDRESS', 'CONTROL URL', 'VERSION', 'WORKERS', 'GENERATION', 'STARTED']];
  for (const i of f.instances) {
    rows.push([i.instance_id, i.leader ? 'yes' : '', i.address, i.control_url ?? '-', i.version, String(i.workers), String(i.graph_generation),
      i.started_at]);
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  for (const r of rows) lines.push(r.map((x, c) => x.padEnd(widths[c])).join('  ').trimEnd());
  return `${lines.join('\n')}\n`;
}

type Options = { url?: unknown; token?: unknown; json?: boolean; config?: unknown };

/** `pipeline`, `pipelines` and `steps` of a configuration file, as written. */
function pipelineKeys(file: string): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = parseText(readFileSync(file, 'utf8'), file);
  } catch (err) {
    return usage(`--config ${file}: ${(err as Error).message.split('\n')[0]}`);
  }
  const o = (raw ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of ['pipeline', 'pipelines', 'steps']) if (o[k] !== undefined) out[k] = o[k];
  return out;
}

export async function fleetCommand(action: string, o: Options): Promise<void> {
  if (action !== 'status' && action !== 'publish') usage(`unknown action "${action}" (one of status, publish)`);
  if (action === 'status' && o.config !== undefined) usage('--config does not apply to proxy fleet status');
  const r = endpointUrl('url', o.url === undefined ? undefined : typedOption('url') ?? String(o.url), 'PROXY_CONTROL_URL', DEFAULT_URL);
  const url = 'url' in r ? r.url : usage(r.problem);
  const token = (o.token === undefined ? undefined : typedOption('token') ?? String(o.token)) ?? process.env.PROXY_CONTROL_TOKEN ??
    process.env.PROXY_CONTROL_PLANE_TOKEN ?? '';
  const client = new CanaryClient(url, token === '' ? null : token);
  if (action === 'publish') {
    if (typeof o.config !== 'string') usage('proxy fleet publish needs --config <file>');
    const r = await client.json<{ generation: number }>('POST', '/api/v1/fleet/pipelines', pipelineKeys(o.config as string));
    process.stdout.write(o.json === true ? `${JSON.stringify(r)}\n` : `published the pipelines of ${String(o.config)} as fleet generation ` +
      `${r.generation}; every instance applies it (proxy fleet status shows what each serves)\n`);
    return;
  }
  const f = await client.json<FleetView>('GET', '/api/v1/fleet');
  process.stdout.write(o.json === true ? `${JSON.stringify(f, null, 2)}\n` : renderFleet(f));
}

export function registerFleet(cli: CAC): void {
  cli.command('fleet <action>', 'The fleet of proxies this instance belongs to: status (instances, leader, what each serves), publish --config ' +
    '<file> (its pipelines as the fleet\'s next generation)')
    .option('--url <url>', `control-plane URL of any instance (default $PROXY_CONTROL_URL, else ${DEFAULT_URL})`)
    .option('--token <token>', 'bearer token (default $PROXY_CONTROL_TOKEN, else $PROXY_CONTROL_PLANE_TOKEN)')
    .option('--json', 'machine-readable output (the API\'s JSON) on stdout')
    .option('--config <file>', 'publish: the configuration file whose pipeline, pipelines and steps are published')
    .action(async (action: string, o: Options) => {
      try {
        await fleetCommand(String(action), o);
      } catch (err) {
        if (!(err instanceof CanaryCliError)) throw err;
        const prefix = err.exitCode === EXIT.usage ? '' : `${err.status !== null ? `${err.status} ` : ''}${err.code}: `;
        process.stderr.write(`proxy fleet ${String(action)}: ${prefix}${err.message}\n`);
        process.exit(err.exitCode);
      }
    });
}
