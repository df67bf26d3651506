// `proxy plugin new <name> [--dir <parent>]`: scaffolds an AssemblyScript plugin folder that builds
// and tests as is (see docs/plugins.md). The generated files reach the SDK by relative paths:
// inside this repository straight to `sdk/`, elsewhere through the installed `pipeline-proxy`
// package (`node_modules/pipeline-proxy/sdk`), which the generated package.json depends on.
// cac has no two-word commands, so `plugin` takes the action as its first argument.
import type { CAC } from 'cac';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exitCodeOf, type CodesOf } from '../errors/catalogue.ts';

export const PLUGIN_NAME = /^[a-z][a-z0-9_-]*$/;

export type PluginScaffoldErrorCode = CodesOf<'PluginScaffoldError'>;

/** A refused scaffold request: the caller's mistake, so the CLI exits 2. */
export class PluginScaffoldError extends Error {
  readonly code: PluginScaffoldErrorCode;
  constructor(code: PluginScaffoldErrorCode, message: string) {
    super(message);
    this.name = 'PluginScaffoldError';
    this.code = code;
  }
}

/** Root of this package (the folder holding sdk/ and package.json). */
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ScaffoldOptions {
  name: string;
  /** Folder the plugin folder is created in (default: the current directory). */
  parent?: string;
}

export interface ScaffoldResult {
  dir: string;
  /** Paths relative to dir, in creation order. */
  files: string[];
  /** True when the SDK is referenced inside this repository rather than through node_modules. */
  inRepo: boolean;
}

/** Creates `<parent>/<name>/`; throws PluginScaffoldError for a bad name or an existing folder. */
export function scaffoldPlugin(opts: ScaffoldOptions): ScaffoldResult {
  const { name } = opts;
  if (!PLUGIN_NAME.test(name)) {
    throw new PluginScaffoldError('PROXY_ERR_PLUGIN_BAD_NAME',
      `invalid plugin name "${name}": use lowercase letters, digits, "_" and "-", starting with a letter (${PLUGIN_NAME.source})`);
  }
  const dir = resolve(opts.parent ?? '.', name);
  if (existsSync(dir)) throw new PluginScaffoldError('PROXY_ERR_PLUGIN_EXISTS', `${dir} already exists; choose another name or --dir`);

  const inRepo = isInside(PACKAGE_ROOT, dir) && !isInside(join(PACKAGE_ROOT, 'node_modules'), dir);
  // The SDK folder as seen from the plugin folder, with forward slashes (asc and import specifiers).
  const sdk = inRepo ? posix(relative(dir, join(PACKAGE_ROOT, 'sdk'))) : 'node_modules/pipeline-proxy/sdk';
  const files: [string, string][] = [
    ['assembly/index.ts', stepSource(name, `../${sdk}`)],
    ['asconfig.json', asconfig(name, sdk)],
    ['package.json', packageJson(name, inRepo)],
    [`test/${name}.test.mjs`, testSource(name, `../${sdk}`)],
    ['README.md', readme(name, inRepo)],
  ];
  for (const [rel, text] of files) {
    const path = join(dir, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
  return { dir, files: files.map(([rel]) => rel), inRepo };
}

function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function posix(p: string): string {
  return p.split(sep).join('/');
}

function className(name: string): string {
  return name.split(/[-_]/).filter((s) => s !== '').map((s) => s[0]!.toUpperCase() + s.slice(1)).join('') + 'Step';
}

function ownVersions(): { self: string; asc: string; tsx: string } {
  const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };
  return { self: `^${pkg.version}`, asc: pkg.dependencies.assemblyscript ?? '*', tsx: pkg.dependencies.tsx ?? '*' };
}

// --- templates -----------------------------------------------------------------------------

function stepSource(name: string, sdk: string): string {
  const cls = className(name);
  return `// ${name}: a pipeline step for pipeline-proxy. Reference: docs/plugins.md of pipeline-proxy.
//
// A step overrides the callbacks it needs; the others are no-ops. Each callback returns
// Action.Continue (go on with the next step) or Action.Stop (skip the later steps of this phase).
import { Step, Context, Action, registerStep, log } from "${sdk}/assembly/index";

class ${cls} extends Step {
  /** The step's \`config\` object as JSON text. Return false to refuse it: the pipeline then does
   *  not load (on a reload the old one keeps running). */
  onConfigure(config: string): bool {
    return true;
  }

  /** Request phase: runs before the command goes upstream. */
  onRequest(ctx: Context): Action {
    log.info(ctx.op + " " + ctx.db + "." + ctx.collection);

    // Refuse the command: the client gets { ok: 0, errmsg, code, codeName }.
    //   if (ctx.op == "drop") return ctx.reject(13, "Unauthorized", "drop is not allowed");
    //
    // Answer without the upstream, with a BSON document (see sdk/assembly/bson BsonWriter):
    //   if (ctx.op == "ping") return ctx.replyLocal(okDocument);
    //
    // Read the command: BsonDoc.fromBytes(ctx.body()); replace it: ctx.replaceBody(bytes).
    return Action.Continue;
  }

  /** Response phase: runs over the upstream's reply (ctx.body() is the reply document). */
  onResponse(ctx: Context): Action {
    return Action.Continue;
  }
}

registerStep(new ${cls}());
// The ABI functions the proxy calls (proxy_on_configure, proxy_on_request, ...).
export * from "${sdk}/assembly/exports";
`;
}

function asconfig(name: string, sdk: string): string {
  // Same settings as pipeline-proxy's own plugins: the incremental runtime (a plugin instance is
  // long-lived and allocates per request; the stub runtime never frees), no JS bindings, and
  // AssemblyScript's abort routed to the host so a failed assertion becomes a step error, and
  // SIMD on (the SDK's log records use it when enabled).
  return `${JSON.stringify({
    targets: {
      release: { outFile: `build/${name}.wasm`, optimizeLevel: 3, shrinkLevel: 0, converge: false, noAssert: false, debug: false },
      debug: { outFile: `build/${name}.debug.wasm`, debug: true },
    },
    options: {
      runtime: 'incremental',
      exportRuntime: false,
      bindings: false,
      use: [`abort=${sdk}/assembly/host/abortHandler`],
      enable: ['simd'],
    },
  }, null, 2)}\n`;
}

function packageJson(name: string, inRepo: boolean): string {
  const v = ownVersions();
  const pkg: Record<string, unknown> = {
    name,
    version: '0.1.0',
    private: true,
    type: 'module',
    description: `pipeline-proxy step "${name}" (AssemblyScript)`,
    // Lets a proxy load the plugin with steps.<name>.package.
    wasm: `build/${name}.wasm`,
    scripts: {
      build: `asc assembly/index.ts --config asconfig.json --target release --outFile build/${name}.wasm`,
      test: `node --import tsx --test test/${name}.test.mjs`,
    },
  };
  // Inside the pipeline-proxy repository the tools and the SDK come from the repository itself.
  if (!inRepo) pkg.devDependencies = { assemblyscript: v.asc, 'pipeline-proxy': v.self, tsx: v.tsx };
  return `${JSON.stringify(pkg, null, 2)}\n`;
}

function testSource(name: string, sdk: string): string {
  return `// Unit tests of the ${name} step with pipeline-proxy's host emulator (sdk/testing): no proxy, no sockets.
// Build first: npm run build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { PluginHarness, Verdict } from '${sdk}/testing/index.ts';

const wasm = fileURLToPath(new URL('../build/${name}.wasm', import.meta.url));

test('${name} lets a find through and logs op db.collection', async () => {
  const h = await PluginHarness.load(wasm, { config: {} });
  const r = h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { cursor: { firstBatch: [], id: 0, ns: 'app.users' }, ok: 1 });
  assert.equal(r.verdict, Verdict.Continue);
  assert.equal(r.newRequest, null);
  assert.equal(r.newReply, null);
  assert.ok(h.logs.some((l) => l.level === 'info' && l.msg === 'find app.users'), JSON.stringify(h.logs));
});

test('${name} is timed as wasm:${name} in both phases', async () => {
  const h = await PluginHarness.load(wasm);
  h.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  assert.deepEqual(h.records.map((x) => [x.step, x.phase, x.error]), [['wasm:${name}', 0, false], ['wasm:${name}', 1, false]]);
});
`;
}

function readme(name: string, inRepo: boolean): string {
  const install = inRepo ? '' : 'npm install          # assemblyscript, tsx and pipeline-proxy (the SDK)\n';
  return `# ${name}

A [pipeline-proxy](https://www.npmjs.com/package/pipeline-proxy) step written in AssemblyScript.
Guide and SDK reference: \`docs/plugins.md\` of pipeline-proxy.

\`\`\`sh
${install}npm run build        # → build/${name}.wasm
npm test             # unit tests with the SDK's host emulator (sdk/testing)
\`\`\`

| file | what |
|---|---|
| \`assembly/index.ts\` | the step: \`onConfigure\`, \`onRequest\`, \`onResponse\` |
| \`asconfig.json\` | compiler settings the proxy expects (incremental runtime, abort routed to the host) |
| \`test/${name}.test.mjs\` | tests with \`PluginHarness\` |

## Use it in the proxy

\`\`\`yaml
pipeline:
  request: ["wasm:${name}"]
steps:
  ${name}:
    module: path/to/${name}/build/${name}.wasm   # relative to the proxy's working directory
    config: {}                                   # handed to onConfigure as JSON
    # on_error: open | closed                    # what a trap does to the request (default open)
\`\`\`

Each call is timed as \`wasm:${name}\` in the proxy's profile.
`;
}

// --- command ---------------------------------------------------------------------------------

export function registerPlugin(cli: CAC): void {
  cli.command('plugin <action> [name]', 'Plugin tools: `plugin new <name> [--dir <parent>]` scaffolds an AssemblyScript plugin')
    .option('--dir <parent>', 'folder to create the plugin folder in (default: current directory)')
    .action((action: string, name: string | undefined, opts: { dir?: unknown }) => {
      try {
        if (action !== 'new') throw new PluginScaffoldError('PROXY_ERR_PLUGIN_BAD_ACTION', `unknown plugin action "${action}" (expected: new)`);
        if (name === undefined) throw new PluginScaffoldError('PROXY_ERR_PLUGIN_BAD_NAME', 'missing plugin name: proxy plugin new <name>');
        const parent = opts.dir === undefined ? undefined : String(opts.dir);
        const r = scaffoldPlugin({ name, ...(parent !== undefined ? { parent } : {}) });
        const shown = relative(process.cwd(), r.dir) || '.';
        process.stdout.write(`created ${shown}/\n${r.files.map((f) => `  ${f}\n`).join('')}\nnext:\n  cd ${shown}\n${r.inRepo ? '' : '  npm ' +
          'install\n'}  npm run build && npm test\n`);
      } catch (err) {
        if (!(err instanceof PluginScaffoldError)) throw err;
        process.stderr.write(`proxy plugin: ${err.message}\n`);
        process.exit(exitCodeOf(err.code));
      }
    });
}
