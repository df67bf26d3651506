// WebAssembly components (the WIT world in sdk/wit/step.wit): detect, transpile with jco, compile.
// Off the hot path. A component is transpiled once per content hash into
// build/components-cache/<sha256>-v<layout>/ (jco's JavaScript bindings + the core modules it splits out),
// with `instantiation: 'sync'`: the core modules are compiled here, asynchronously, and an instance
// is then built synchronously from them — at load and again after a trap, inside call(), exactly
// like a core-module PluginSlot. Exported functions of the generated bindings are synchronous.
//
// Protection is the same as for core modules: every core module jco splits out is metered with
// fuel and its memory capped (metering.ts, off the event loop; the metered bytes are cached next to
// the bindings, per fuel and cap, because the embedded JS engine of a componentize-js component is
// ~12 MB and takes seconds through binaryen). The modules are instantiated through our own
// instantiateCore, which adds the fuel-exhausted import and collects each instance's fuel global;
// ComponentInstance refills them before each step call.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BoundedCache } from './bounded-cache.ts';
import { PluginLoadError, FuelExhaustedError } from './errors.ts';
import { instrumentModule, METERING_VERSION } from './metering.ts';
import { IMPORT_MODULE, Export, ABI_VERSION, WIT_PACKAGE, WIT_VERSION } from './abi.ts';

/** `\0asm` */
const MAGIC = [0x00, 0x61, 0x73, 0x6d];

/**
 * True when the header (≥ 8 bytes) is a component: after the magic, core modules carry version
 * 01 00 00 00, components a different version/layer word (01 00 in the layer half, e.g. 0d 00 01 00).
 */
export function isComponentHeader(header: Uint8Array): boolean {
  if (header.length < 8) return false;
  for (let i = 0; i < 4; i++) if (header[i] !== MAGIC[i]) return false;
  const core = header[4] === 0x01 && header[5] === 0x00 && header[6] === 0x00 && header[7] === 0x00;
  return !core && header[6] === 0x01 && header[7] === 0x00;
}

/** The host side of `proxy:step/host`, as jco's bindings call it (camelCase names). */
export type ComponentHostImports = Record<string, (...args: never[]) => unknown>;

/** The `step` export of an instance. All three calls are synchronous. */
export interface ComponentStepExports {
  configure(config: string): boolean;
  onRequest(bodySize: number, flags: number): number;
  onResponse(replySize: number, flags: number): number;
}

type GetCoreModule = (path: string) => WebAssembly.Module;
type InstantiateCore = (module: WebAssembly.Module, imports?: WebAssembly.Imports) => WebAssembly.Instance;
type SyncInstantiate = (getCoreModule: GetCoreModule, imports: Record<string, unknown>, instantiateCore?: InstantiateCore) => Record<string, unknown>;

/** A live component instance: its step exports and the refill of its fuel. */
export interface ComponentInstanceExports {
  readonly step: ComponentStepExports;
  /** Sets every metered core instance's fuel back to the budget (before each step call). */
  refuel(): void;
}

export interface CompiledComponent {
  readonly name: string; // "wasm:<name>"
  readonly hash: string;
  /** Folder holding the transpiled bindings. */
  readonly dir: string;
  readonly configJson: string;
  readonly fuel: number;
  readonly maxMemoryPages: number;
  /** Builds a fresh instance bound to `host` (synchronous; throws on a trap in the start code). */
  instantiate(host: ComponentHostImports): ComponentInstanceExports;
}

export interface ComponentCompileOptions {
  readonly name: string;
  readonly config: unknown;
  readonly fuel: number;
  readonly maxMemoryPages: number;
  /** Transpile cache root (default build/components-cache under the working directory). */
  readonly cacheDir?: string;
  /** Loaded components by content + limits (the WasmHost's); none: load every time. */
  readonly cache?: BoundedCache<string, Promise<unknown>>;
}

/** The WIT interface names the bindings import the host under (with and without the version). */
export const HOST_INTERFACE = `${WIT_PACKAGE}/host`;
export const HOST_INTERFACE_VERSIONED = `${WIT_PACKAGE}/host@${WIT_VERSION}`;
export const STEP_INTERFACE = `${WIT_PACKAGE}/step@${WIT_VERSION}`;

const BINDINGS = 'step.js';
/** Written last into a transpiled folder: what jco reported (core modules, imports, exports). */
const DONE = '.complete';
/** Part of the cache folder's name: bump when what a folder holds changes (v2: DONE lists imports and exports). */
const CACHE_LAYOUT = 2;

interface Transpiled { readonly cores: string[]; readonly imports: string[]; readonly exports: string[] }
interface Loaded { readonly instantiate: SyncInstantiate; readonly modules: Map<string, WebAssembly.Module>; readonly dir: string }

/**
 * Why a component does not fit this host, or null: it must export the step interface of this
 * ABI's WIT package version (the version it was built against names the ABI: 0.<ABI>.0) and
 * import nothing but the host interface.
 */
export function componentAbiProblem(t: { imports: readonly string[]; exports: readonly string[] }): string | null {
  if (!t.exports.includes(STEP_INTERFACE)) {
    const other = t.exports.find((e) => e.startsWith(`${WIT_PACKAGE}/step@`));
    if (other === undefined) return `does not export ${STEP_INTERFACE} (world plugin of sdk/wit/step.wit)`;
    const v = other.slice(other.indexOf('@') + 1);
    const m = /^0\.(\d+)\.0$/.exec(v);
    return `was built for plugin ABI ${m === null ? `(WIT ${WIT_PACKAGE}@${v})` : m[1]}, this proxy provides ABI ${ABI_VERSION} ` +
      `(WIT ${WIT_PACKAGE}@${WIT_VERSION}): rebuild it against this proxy's sdk/wit/step.wit`;
  }
  const foreign = t.imports.filter((i) => i !== HOST_INTERFACE && i !== HOST_INTERFACE_VERSIONED);
  if (foreign.length > 0) return `imports ${foreign.join(', ')}: a step component may import only ${HOST_INTERFACE_VERSIONED}`;
  return null;
}

export async function compileComponentBytes(bytes: Uint8Array, opts: ComponentCompileOptions): Promise<CompiledComponent> {
  if (!isComponentHeader(bytes)) throw new PluginLoadError(opts.name, 'not a WebAssembly component');
  const hash = createHash('sha256').update(bytes).digest('hex');
  const root = resolve(opts.cacheDir ?? 'build/components-cache');
  const key = `${root}\0${hash}\0${opts.fuel}\0${opts.maxMemoryPages}`;
  const cache = opts.cache;
  let p = cache?.get(key) as Promise<Loaded> | undefined;
  if (p === undefined) {
    p = load(bytes, hash, root, opts);
    if (cache !== undefined) {
      cache.set(key, p);
      p.catch(() => cache.delete(key));
    }
  }
  const l = await p;
  const modules = l.modules;
  const getCoreModule: GetCoreModule = (file) => {
    const m = modules.get(file);
    if (m === undefined) throw new PluginLoadError(opts.name, `transpiled component asks for unknown core module ${file}`);
    return m;
  };
  const name = opts.name;
  const fuel = opts.fuel;
  const exhausted = { proxy_fuel_exhausted: (): never => { throw new FuelExhaustedError(name, fuel); } };
  return {
    name,
    hash,
    dir: l.dir,
    configJson: JSON.stringify(opts.config ?? {}),
    fuel,
    maxMemoryPages: opts.maxMemoryPages,
    instantiate(host) {
      const imports = { [HOST_INTERFACE]: host, [HOST_INTERFACE_VERSIONED]: host };
      const fuelGlobals: WebAssembly.Global[] = [];
      const instantiateCore: InstantiateCore = (module, importObject) => {
        const inst = new WebAssembly.Instance(module, { ...importObject, [IMPORT_MODULE]: exhausted });
        const g = inst.exports[Export.fuel];
        if (g instanceof WebAssembly.Global) fuelGlobals.push(g);
        return inst;
      };
      const exp = l.instantiate(getCoreModule, imports, instantiateCore);
      const step = (exp[STEP_INTERFACE] ?? exp.step) as ComponentStepExports | undefined;
      if (step === undefined || typeof step.onRequest !== 'function') {
        throw new PluginLoadError(name, `component does not export ${STEP_INTERFACE} (world plugin of sdk/wit/step.wit)`);
      }
      const budget = Math.min(fuel, 0x7fffffff) | 0;
      return {
        step,
        refuel() { for (let i = 0; i < fuelGlobals.length; i++) fuelGlobals[i]!.value = budget; },
      };
    },
  };
}

async function load(bytes: Uint8Array, hash: string, root: string, opts: ComponentCompileOptions): Promise<Loaded> {
  const name = opts.name;
  const dir = join(root, `${hash}-v${CACHE_LAYOUT}`);
  if (!existsSync(join(dir, DONE))) await transpileInto(bytes, dir, name);
  const t = JSON.parse(await readFile(join(dir, DONE), 'utf8')) as Transpiled;
  const problem = componentAbiProblem(t);
  if (problem !== null) throw new PluginLoadError(name, problem);
  let mod: { instantiate?: SyncInstantiate };
  try {
    mod = await import(pathToFileURL(join(dir, BINDINGS)).href) as { instantiate?: SyncInstantiate };
  } catch (err) {
    throw new PluginLoadError(name, `cannot import the transpiled bindings in ${dir}`, err);
  }
  if (typeof mod.instantiate !== 'function') throw new PluginLoadError(name, `transpiled bindings in ${dir} have no instantiate()`);
  const list = t.cores;
  const modules = new Map<string, WebAssembly.Module>();
  const meteredDir = join(dir, `metered-v${METERING_VERSION}-${opts.fuel}-${opts.maxMemoryPages}`);
  await Promise.all(list.map(async (file) => {
    const bytes = await meteredCore(dir, meteredDir, file, opts);
    try {
      modules.set(file, await WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>));
    } catch (err) {
      throw new PluginLoadError(name, `compiling the component core module ${file} failed`, err);
    }
  }));
  return { instantiate: mod.instantiate, modules, dir };
}

/** The metered form of one core module, from the cache or made (and cached) now. */
async function meteredCore(dir: string, meteredDir: string, file: string, opts: ComponentCompileOptions): Promise<Uint8Array> {
  const cached = join(meteredDir, file);
  if (existsSync(cached)) return readFile(cached);
  const metered = await instrumentModule(await readFile(join(dir, file)), {
    name: opts.name, fuel: opts.fuel, maxMemoryPages: opts.maxMemoryPages, component: true,
  });
  try {
    await mkdir(meteredDir, { recursive: true });
    const tmp = `${cached}.tmp-${process.pid}-${Date.now()}`;
    await writeFile(tmp, metered);
    await rename(tmp, cached);
  } catch {
    // a read-only cache folder: meter again next time
  }
  return metered;
}

/** jco transpile into a temporary folder, then rename it into place (concurrent loaders are safe). */
async function transpileInto(bytes: Uint8Array, dir: string, name: string): Promise<void> {
  let files: Record<string, Uint8Array>;
  let imports: string[];
  let exports: [string, string][];
  try {
    const { transpile } = await import('@bytecodealliance/jco');
    ({ files, imports, exports } = await transpile(bytes, {
      name: 'step',
      instantiation: 'sync',
      noTypescript: true,
      quiet: true,
    }));
  } catch (err) {
    throw new PluginLoadError(name, 'jco transpile failed', err);
  }
  if (files[BINDINGS] === undefined) throw new PluginLoadError(name, `jco produced no ${BINDINGS}`);
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  const cores: string[] = [];
  await mkdir(tmp, { recursive: true });
  for (const [file, content] of Object.entries(files)) {
    if (file.endsWith('.d.ts')) continue;
    if (file.endsWith('.wasm')) cores.push(file);
    const out = join(tmp, file);
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, content);
  }
  await writeFile(join(tmp, 'package.json'), '{ "type": "module" }\n');
  const done: Transpiled = { cores, imports, exports: exports.map(([e]) => e) };
  await writeFile(join(tmp, DONE), JSON.stringify(done));
  try {
    await rename(tmp, dir);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, DONE))) throw new PluginLoadError(name, `cannot write the transpile cache ${dir}`, err);
  }
}
