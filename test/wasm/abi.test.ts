// The ABI is defined once (runtime/wasm/abi-spec.ts): the generated forms are up to date, the host
// provides exactly its functions, every built plugin imports only those, and a module or component
// built for another ABI is refused at load naming both versions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { Registry } from 'prom-client';
import { buildPlugins } from '../../scripts/build-plugins.mjs';
import { renderAll } from '../../runtime/wasm/abi-render.ts';
import { ABI_VERSION, ABI_VERSION_EXPORT, HOST_FUNCTIONS, IMPORT_MODULE, WIT_VERSION } from '../../runtime/wasm/abi-spec.ts';
import { readModuleInterface, abiProblems, declaredAbiVersion, HOST_FUNCTION_TYPES } from '../../runtime/wasm/module-abi.ts';
import { componentAbiProblem, STEP_INTERFACE, type CompiledComponent } from '../../runtime/wasm/component-compile.ts';
import {
  compilePluginBytes, compilePluginFile, PluginInstance, ComponentInstance, PluginLoadError, KvStore, PluginMetricRegistry,
  type PluginServices, type HostLog,
} from '../../runtime/wasm/index.ts';
import { PluginHarness } from '../../sdk/testing/index.ts';

const ROOT = resolve('.');

test('sdk/assembly/abi.ts, sdk/wit/step.wit and the Host ABI tables of docs/plugins.md are generated from abi-spec.ts (regenerate: npm run abi)', () => {
  for (const [path, text] of renderAll()) assert.equal(readFileSync(path, 'utf8'), text, `${relative(ROOT, path)} is stale: run npm run abi`);
});

/** Every plugin the repository builds: built-ins and examples into build/plugins, fixtures into build/test-plugins. */
async function builtPlugins(): Promise<string[]> {
  const sets = [
    { bases: ['plugins', 'examples'], outDir: resolve('build/plugins') },
    { bases: ['test/fixtures/plugins'], outDir: resolve('build/test-plugins') },
  ];
  const out: string[] = [];
  for (const s of sets) {
    await buildPlugins({ ...s, log: () => {} });
    for (const base of s.bases) {
      for (const name of readdirSync(base)) {
        if (existsSync(join(base, name, 'assembly', 'index.ts'))) out.push(join(s.outDir, `${name}.wasm`));
      }
    }
  }
  return out;
}

test('every built plugin declares this ABI version and imports only host functions, with their signatures', async () => {
  const files = await builtPlugins();
  assert.ok(files.length >= 10, `found ${files.length} plugins`);
  for (const file of files) {
    const mi = readModuleInterface(readFileSync(file));
    const name = relative(ROOT, file);
    assert.equal(declaredAbiVersion(mi), ABI_VERSION, `${name}: ABI version`);
    assert.deepEqual(abiProblems(mi), [], name);
    // and the engine agrees with our reading of the binary
    const names = WebAssembly.Module.imports(new WebAssembly.Module(readFileSync(file))).map((i) => `${i.module}.${i.name}`);
    assert.deepEqual(mi.imports.map((i) => `${i.module}.${i.name}`), names, name);
  }
});

const logger: HostLog = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };
function services(step: string): PluginServices {
  return {
    step, pipelineId: 'abi', variant: 'baseline', logger, kv: new KvStore(1 << 20), metrics: new PluginMetricRegistry(new Registry()),
    rebuilds: { inc() {} }, subop: null, fuel: 1_000_000,
  };
}

test('the host gives a core module exactly the ABI\'s host functions, with their arities', async () => {
  const [file] = (await builtPlugins()).filter((f) => f.endsWith('/continue.wasm'));
  const plugin = await compilePluginFile(file!, { name: 'wasm:continue', fuel: 1_000_000, maxMemoryPages: 64, config: {} });
  const inst = new PluginInstance(plugin, services('wasm:continue'));
  assert.deepEqual(Object.keys(inst.hostImports).sort(), HOST_FUNCTIONS.map((f) => f.name).sort());
  for (const f of HOST_FUNCTIONS) assert.equal(inst.hostImports[f.name]!.length, f.params.length, `${f.name} arity`);
});

test('the host gives a component exactly the WIT host interface\'s functions, with their arities', () => {
  const camel = (s: string) => s.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
  let given: Record<string, (...a: never[]) => unknown> = {};
  const fake = {
    name: 'wasm:fake', hash: '', dir: '', configJson: '{}', fuel: 1, maxMemoryPages: 1,
    instantiate(host: Record<string, (...a: never[]) => unknown>) {
      given = host;
      return { step: { configure: () => true, onRequest: () => 0, onResponse: () => 0 }, refuel() {} };
    },
  } as unknown as CompiledComponent;
  new ComponentInstance(fake, services('wasm:fake'));
  const wit = HOST_FUNCTIONS.filter((f) => f.wit !== null).map((f) => f.wit!);
  assert.deepEqual(Object.keys(given).sort(), wit.map((f) => camel(f.name)).sort());
  for (const f of wit) assert.equal(given[camel(f.name)]!.length, f.params.length, `${f.name} arity`);
});

// ---- hand-assembled modules: the load-time refusals ---------------------------------------------

const VT = { i32: 0x7f, f64: 0x7c } as const;
const u32 = (n: number): number[] => { const o: number[] = []; do { let b = n & 0x7f; n >>>= 7; if (n !== 0) b |= 0x80; o.push(b); } while (n !== 0);
  return o; };
const str = (s: string): number[] => { const b = [...new TextEncoder().encode(s)]; return [...u32(b.length), ...b]; };
const vec = (items: number[][]): number[] => [...u32(items.length), ...items.flat()];
const section = (id: number, body: number[]): number[] => [id, ...u32(body.length), ...body];

/** A module importing `imports` (module `proxy` unless given) and exporting memory and, if given, the version global. */
function module(opts: { version?: number; imports?: { module?: string; name: string; params: (keyof typeof VT)[];
  results: (keyof typeof VT)[] }[] }): Uint8Array {
  const imports = opts.imports ?? [];
  const types = imports.map((i) => [0x60, ...vec(i.params.map((p) => [VT[p]])), ...vec(i.results.map((r) => [VT[r]]))]);
  const bytes = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  if (types.length > 0) bytes.push(...section(1, vec(types)));
  if (imports.length > 0) bytes.push(...section(2, vec(imports.map((i, k) => [...str(i.module ?? IMPORT_MODULE), ...str(i.name), 0x00, ...u32(k)]))));
  bytes.push(...section(5, vec([[0x00, 0x01]])));
  const exports = [[...str('memory'), 0x02, 0x00]];
  if (opts.version !== undefined) {
    bytes.push(...section(6, vec([[VT.i32, 0x00, 0x41, ...u32(opts.version), 0x0b]])));
    exports.push([...str(ABI_VERSION_EXPORT), 0x03, 0x00]);
  }
  bytes.push(...section(7, vec(exports)));
  return new Uint8Array(bytes);
}

const load = (bytes: Uint8Array) => compilePluginBytes(bytes, { name: 'wasm:hand', fuel: 1000, maxMemoryPages: 4, config: {} });

test('a module built for another ABI is refused at load, naming both versions', async () => {
  await assert.rejects(load(module({ version: ABI_VERSION + 6 })), (err: unknown) =>
    err instanceof PluginLoadError && err.message.includes(`built for plugin ABI ${ABI_VERSION + 6}, this proxy provides ABI ${ABI_VERSION}`));
  await assert.rejects(load(module({})), (err: unknown) =>
    err instanceof PluginLoadError && /declares no plugin ABI version/.test(err.message) && err.message.includes(`provides ABI ${ABI_VERSION}`));
  const ok = await load(module({ version: ABI_VERSION }));
  assert.equal(ok.name, 'wasm:hand');
});

test('a module importing what the host does not provide, or with another signature, is refused at load', async () => {
  await assert.rejects(load(module({ version: ABI_VERSION, imports: [{ name: 'proxy_log', params: ['i32'], results: [] }] })),
    /imports proxy\.proxy_log as \(i32\) -> nil; ABI \d+ provides \(i32, i32, i32\) -> nil/);
  await assert.rejects(load(module({ version: ABI_VERSION, imports: [{ name: 'proxy_teleport', params: [], results: [] }] })),
    /imports proxy\.proxy_teleport \(function\), which ABI \d+ does not provide/);
  await assert.rejects(load(module({ version: ABI_VERSION, imports: [{ module: 'env', name: 'seed', params: [], results: ['f64'] }] })),
    /imports env\.seed, outside the host's namespace "proxy"/);
  const good = HOST_FUNCTION_TYPES.get('proxy_now')!;
  assert.deepEqual(good, { params: [], results: ['f64'] });
  await load(module({ version: ABI_VERSION, imports: [{ name: 'proxy_now', params: [], results: ['f64'] }] }));
});

test('the refusal reaches the pipeline loader and the harness', async () => {
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const dir = mkdtempSync(join((await import('node:os')).tmpdir(), 'abi-'));
  const file = join(dir, 'old.wasm');
  writeFileSync(file, module({ version: ABI_VERSION - 1 }));
  await assert.rejects(PluginHarness.load(file), new RegExp(`plugin wasm:old: was built for plugin ABI ${ABI_VERSION - 1}, this proxy provides ` +
    `ABI ${ABI_VERSION}`));
});

test('a component built against another WIT package version (ABI) is refused naming both', () => {
  assert.equal(STEP_INTERFACE, `proxy:step/step@${WIT_VERSION}`);
  assert.equal(componentAbiProblem({ imports: ['proxy:step/host'], exports: ['step', STEP_INTERFACE] }), null);
  assert.match(componentAbiProblem({ imports: ['proxy:step/host'], exports: ['step', 'proxy:step/step@0.9.0'] })!,
    new RegExp(`built for plugin ABI 9, this proxy provides ABI ${ABI_VERSION} \\(WIT proxy:step@${WIT_VERSION.replace(/\./g, '\\.')}\\)`));
  assert.match(componentAbiProblem({ imports: ['proxy:step/host', 'wasi:io/streams@0.2.0'], exports: [STEP_INTERFACE] })!, /may import only proxy:step\/host@/);
});

test('the JavaScript component example imports the host interface of this ABI version', () => {
  const src = readFileSync('examples/component-js/step.js', 'utf8');
  const m = /from 'proxy:step\/host@([^']+)'/.exec(src);
  assert.equal(m?.[1], WIT_VERSION, 'examples/component-js/step.js: update its import to this WIT package version');
});
