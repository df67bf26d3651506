#!/usr/bin/env node
// Builds the JavaScript component steps into WebAssembly components with componentize-js
// (offline): examples/<folder>/step.js → build/components/<folder with - as _>.wasm, against the
// world `plugin` of sdk/wit/step.wit, with every WASI feature disabled so that the component's
// only import is our `proxy:step/host` interface. Outputs newer than their folder and sdk/wit are
// skipped. A build takes seconds to a minute and produces ~12 MB (the embedded JS engine).
//
//   node scripts/build-components.mjs [--force] [--out DIR] [FOLDER...]
//
// componentize-js 0.23 imports `@bytecodealliance/preview2-shim`, which npm did not hoist next to
// it here (only jco's nested copy, 0.26, is installed). The build therefore resolves that package
// from jco's folder (a module resolve hook scoped to this one specifier), and because shim 0.26
// grants no filesystem access by default, preopens only the WIT folder the splicer must read.
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve, dirname, basename } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { register } from 'node:module';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const WIT_DIR = join(root, 'sdk', 'wit');
export const DEFAULT_OUT = join(root, 'build', 'components');
const DISABLED_FEATURES = ['stdio', 'random', 'clocks', 'http', 'fetch-event'];

function newestMtime(p) {
  if (!existsSync(p)) return 0;
  const s = statSync(p);
  if (!s.isDirectory()) return s.mtimeMs;
  let t = s.mtimeMs;
  for (const name of readdirSync(p)) t = Math.max(t, newestMtime(join(p, name)));
  return t;
}

/** Component folders: examples/* holding a step.js. */
export function componentSources(bases = ['examples']) {
  const out = [];
  for (const base of bases) {
    const dir = resolve(root, base);
    if (!existsSync(dir)) continue;
    for (const n of readdirSync(dir).sort()) {
      if (existsSync(join(dir, n, 'step.js'))) out.push({ name: n.replace(/-/g, '_'), dir: join(dir, n), entry: join(dir, n, 'step.js') });
    }
  }
  return out;
}

let componentizeFn = null;
async function loadComponentize() {
  if (componentizeFn !== null) return componentizeFn;
  const jcoManifest = pathToFileURL(join(root, 'node_modules', '@bytecodealliance', 'jco', 'package.json')).href;
  const hook = `export async function resolve(spec, ctx, next) {
    if (spec === '@bytecodealliance/preview2-shim' || spec.startsWith('@bytecodealliance/preview2-shim/')) {
      try { return await next(spec, ctx); } catch { return next(spec, { ...ctx, parentURL: ${JSON.stringify(jcoManifest)} }); }
    }
    return next(spec, ctx);
  }`;
  register('data:text/javascript,' + encodeURIComponent(hook));
  const fs = await import('@bytecodealliance/preview2-shim/filesystem');
  if (typeof fs._setPreopens === 'function') fs._setPreopens({ [WIT_DIR]: WIT_DIR });
  ({ componentize: componentizeFn } = await import('@bytecodealliance/componentize-js'));
  return componentizeFn;
}

/**
 * Builds every component found (or those named) into outDir. Returns the output paths (built or
 * up to date).
 */
export async function buildComponents(opts = {}) {
  const outDir = resolve(opts.outDir ?? DEFAULT_OUT);
  const log = opts.log ?? ((line) => console.log(line));
  const only = opts.names ?? null;
  mkdirSync(outDir, { recursive: true });
  const witTime = newestMtime(WIT_DIR);
  const outputs = [];
  for (const src of componentSources(opts.bases)) {
    if (only !== null && !only.includes(src.name) && !only.includes(basename(src.dir))) continue;
    const out = join(outDir, `${src.name}.wasm`);
    outputs.push(out);
    if (!opts.force && existsSync(out) && statSync(out).mtimeMs > Math.max(witTime, newestMtime(src.dir))) {
      log(`component ${src.name}: up to date`);
      continue;
    }
    const componentize = await loadComponentize();
    const t0 = performance.now();
    const { component } = await componentize({
      sourcePath: src.entry,
      witPath: join(WIT_DIR, 'step.wit'),
      worldName: 'plugin',
      disableFeatures: DISABLED_FEATURES,
    });
    writeFileSync(out, component);
    log(`component ${src.name}: ${out} (${(component.length / 1e6).toFixed(1)} MB, ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  }
  return outputs;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const force = args.includes('--force');
  const oi = args.indexOf('--out');
  const outDir = oi >= 0 ? args[oi + 1] : undefined;
  const names = args.filter((a, i) => !a.startsWith('--') && (oi < 0 || i !== oi + 1));
  buildComponents({ force, outDir, names: names.length > 0 ? names : null }).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
