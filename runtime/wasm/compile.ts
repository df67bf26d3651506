// Read, check against the ABI (module-abi.ts), instrument (fuel + memory cap) and compile a plugin module. Off the hot path; compiled
// modules are cached (in the WasmHost's bounded cache, when given) by content + limits so a reload
// with an unchanged plugin skips binaryen and the compiler, and metered modules are kept on disk
// (METERED_CACHE_DIR) so a restart or another process skips binaryen too. A trapped instance is
// rebuilt from the CompiledPlugin's WebAssembly.Module, whatever the cache keeps.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { instrumentModule } from './metering.ts';
import { PluginLoadError } from './errors.ts';
import { Export } from './abi.ts';
import { checkModuleAbi } from './module-abi.ts';
import { readRegularFile } from '../fs/index.ts';
import type { BoundedCache } from './bounded-cache.ts';

export interface CompiledPlugin {
  readonly name: string;
  readonly module: WebAssembly.Module;
  readonly fuel: number;
  readonly maxMemoryPages: number;
  readonly configBytes: Uint8Array;
  readonly exportsRequest: boolean;
  readonly exportsResponse: boolean;
}

export interface CompileOptions {
  readonly name: string; // "wasm:<name>" for messages
  readonly fuel: number;
  readonly maxMemoryPages: number;
  readonly config: unknown;
  /** Compiled modules by content + limits (the WasmHost's); none: compile every time. */
  readonly cache?: BoundedCache<string, Promise<WebAssembly.Module>>;
  /** Where metered modules are kept on disk (default METERED_CACHE_DIR); null: none. */
  readonly meteredCacheDir?: string | null;
}

/** A step's module file (core module or component), read once; unreadable or not a regular file: PluginLoadError naming `name`. */
export async function readPluginFile(path: string, name: string): Promise<Uint8Array> {
  try {
    return await readRegularFile(path);
  } catch (err) {
    throw new PluginLoadError(name, `cannot read ${path}: ${(err as Error).message}`, err);
  }
}

export async function compilePluginFile(path: string, opts: CompileOptions): Promise<CompiledPlugin> {
  return compilePluginBytes(await readPluginFile(path, opts.name), opts);
}

/**
 * Metered modules on disk, by content, limits and instrumentation: a restart, another worker
 * process or another proxy of this package loads a module it has seen without binaryen (whose
 * worker takes ~0.5–1.5 s of CPU to start, then ~70 ms a module). In the package's build folder,
 * beside the built-in modules; a folder that cannot be written only means metering again.
 */
export const METERED_CACHE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'metered-cache');
/** Files the cache keeps; past it, the least recently used go (a plugin rebuilt often adds one per build). */
export const METERED_CACHE_FILES = 64;

let instrumentation: string | null = null;
/** The instrumentation's identity: the code that meters (worker and host side), so that a change to either starts a new cache. */
function instrumentationId(): string {
  if (instrumentation === null) {
    const h = createHash('sha256');
    for (const f of ['metering-worker.mjs', 'metering.ts']) h.update(readFileSync(new URL(`./${f}`, import.meta.url)));
    instrumentation = h.digest('hex').slice(0, 16);
  }
  return instrumentation;
}

/** The metered form of a module: from the disk cache, or made now (and cached). */
async function meteredBytes(bytes: Uint8Array, hash: string, opts: CompileOptions, dir: string): Promise<{ metered: Uint8Array; file: string | null }> {
  const file = join(dir, `${hash}-${instrumentationId()}-${opts.fuel}-${opts.maxMemoryPages}.wasm`);
  try {
    const metered = await readFile(file);
    const now = new Date();
    await utimes(file, now, now).catch(() => {});
    return { metered, file };
  } catch {
    // not cached
  }
  const metered = await instrumentModule(bytes, { name: opts.name, fuel: opts.fuel, maxMemoryPages: opts.maxMemoryPages });
  try {
    await mkdir(dir, { recursive: true });
    const tmp = `${file}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
    await writeFile(tmp, metered);
    await rename(tmp, file);
    await pruneMeteredCache(dir);
  } catch {
    // a read-only package folder: metered again next time
  }
  return { metered, file: null };
}

/** Keeps the METERED_CACHE_FILES most recently used files (a used file's time is touched on each read). */
async function pruneMeteredCache(dir: string): Promise<void> {
  const names = (await readdir(dir)).filter((n) => n.endsWith('.wasm'));
  if (names.length <= METERED_CACHE_FILES) return;
  const aged = await Promise.all(names.map(async (n) => ({ n, t: (await stat(join(dir, n)).catch(() => null))?.mtimeMs ?? 0 })));
  aged.sort((a, b) => a.t - b.t);
  await Promise.all(aged.slice(0, aged.length - METERED_CACHE_FILES).map((a) => rm(join(dir, a.n), { force: true })));
}

export async function compilePluginBytes(bytes: Uint8Array, opts: CompileOptions): Promise<CompiledPlugin> {
  const hash = createHash('sha256').update(bytes).digest('hex');
  const key = hash + `:${opts.fuel}:${opts.maxMemoryPages}`;
  const cache = opts.cache;
  let p = cache?.get(key);
  if (p === undefined) {
    p = (async () => {
      // Before anything else: a plugin built for another ABI is refused naming both versions.
      checkModuleAbi(bytes, opts.name);
      const dir = opts.meteredCacheDir === undefined ? METERED_CACHE_DIR : opts.meteredCacheDir;
      let { metered, file } = dir === null ? { metered: await instrumentModule(bytes, opts), file: null } : await meteredBytes(bytes, hash, opts, dir);
      try {
        return await WebAssembly.compile(metered as Uint8Array<ArrayBuffer>);
      } catch (err) {
        if (file === null) throw new PluginLoadError(opts.name, 'compilation failed', err);
      }
      // A cached file that does not compile (cut short, damaged): dropped, and the module metered again.
      await rm(file, { force: true });
      ({ metered } = await meteredBytes(bytes, hash, opts, dir!));
      try {
        return await WebAssembly.compile(metered as Uint8Array<ArrayBuffer>);
      } catch (err) {
        throw new PluginLoadError(opts.name, 'compilation failed', err);
      }
    })();
    if (cache !== undefined) {
      cache.set(key, p);
      p.catch(() => cache.delete(key));
    }
  }
  const module = await p;
  const names = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
  return {
    name: opts.name,
    module,
    fuel: opts.fuel,
    maxMemoryPages: opts.maxMemoryPages,
    configBytes: new TextEncoder().encode(JSON.stringify(opts.config ?? {})),
    exportsRequest: names.has(Export.onRequest),
    exportsResponse: names.has(Export.onResponse),
  };
}
