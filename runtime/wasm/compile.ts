// Read, check against the ABI (module-abi.ts), instrument (fuel + memory cap) and compile a plugin module. Off the hot path; compiled
// modules are cached (in the WasmHost's bounded cache, when given) by content + limits so a reload
// with an unchanged plugin skips binaryen and the compiler. A trapped instance is rebuilt from the
// CompiledPlugin's WebAssembly.Module, whatever the cache keeps.
import { createHash } from 'node:crypto';
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

export async function compilePluginBytes(bytes: Uint8Array, opts: CompileOptions): Promise<CompiledPlugin> {
  const key = createHash('sha256').update(bytes).digest('hex') + `:${opts.fuel}:${opts.maxMemoryPages}`;
  const cache = opts.cache;
  let p = cache?.get(key);
  if (p === undefined) {
    p = (async () => {
      // Before anything else: a plugin built for another ABI is refused naming both versions.
      checkModuleAbi(bytes, opts.name);
      const metered = await instrumentModule(bytes, { name: opts.name, fuel: opts.fuel, maxMemoryPages: opts.maxMemoryPages });
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
