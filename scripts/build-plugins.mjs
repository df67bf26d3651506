#!/usr/bin/env node
// Compiles every AssemblyScript plugin to build/plugins/<name>.wasm with the asc programmatic API:
//   plugins/<name>/assembly/index.ts and examples/<name>/assembly/index.ts; with --fixtures,
//   test/fixtures/plugins/<name>/assembly/index.ts into build/test-plugins/ instead.
// Outputs newer than every source they could depend on (the plugin folder, sdk/assembly and plugins/_shared) are
// skipped. Metering (fuel) and the memory cap are applied at load time by runtime/wasm, not here,
// so one build serves every fuel/memory setting.
//
// Runtime choice: `incremental` (asconfig.json). A plugin instance lives as long as its pipeline
// and allocates per request (body copies, strings); the `stub` runtime never frees, so a long-lived
// instance would grow to its memory cap and trap (the leak proxy-runtime#40 hit). The price is
// size (the fixture plugins are 5–14 KB) and a collector; stub vs incremental call cost has not
// been measured side by side — the idle-step path allocates nothing (bench/idle-step.ts).
import asc from 'assemblyscript/asc';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function newestMtime(dir) {
  let t = 0;
  if (!existsSync(dir)) return 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const s = statSync(p);
    t = Math.max(t, s.isDirectory() ? newestMtime(p) : s.mtimeMs);
  }
  return t;
}

function collect(base) {
  const dir = join(root, base);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => existsSync(join(dir, n, 'assembly', 'index.ts')))
    .map((n) => ({ name: n, dir: join(dir, n), entry: join(base, n, 'assembly', 'index.ts') }));
}

function sourceFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/**
 * The packages a plugin's AssemblyScript imports that are not installed. An example may use a
 * development package (examples/redact parses its config with assemblyscript-json), which a
 * production install (`npm install --omit=dev`) leaves out: that example is skipped, not a failed
 * build. The built-in plugins import only the SDK.
 */
function missingPackages(dir) {
  const missing = new Set();
  for (const file of sourceFiles(join(dir, 'assembly'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)\b[^'"]*\bfrom\s*['"]([^'"./][^'"]*)['"]/gm)) {
      const name = m[1].split('/').slice(0, m[1].startsWith('@') ? 2 : 1).join('/');
      if (!existsSync(join(root, 'node_modules', name, 'package.json'))) missing.add(name);
    }
  }
  return [...missing];
}

/** Build the plugins found under the given base folders into outDir. Returns built names. */
export async function buildPlugins({ bases = ['plugins', 'examples'], outDir = join(root, 'build', 'plugins'), force = false, log = console.log } = {}) {
  mkdirSync(outDir, { recursive: true });
  // Shared inputs: the SDK, the built-ins' shared helpers (plugins/_shared), the compiler config.
  const sdkTime = Math.max(
    newestMtime(join(root, 'sdk', 'assembly')), newestMtime(join(root, 'plugins', '_shared')),
    statSync(join(root, 'asconfig.json')).mtimeMs,
  );
  const built = [];
  for (const base of bases) {
    for (const p of collect(base)) {
      if (base === 'examples') {
        const missing = missingPackages(p.dir);
        if (missing.length > 0) {
          log(`skipped ${p.entry}: needs ${missing.join(', ')} (a development package: npm install without --omit=dev)`);
          continue;
        }
      }
      const out = join(outDir, `${p.name}.wasm`);
      if (!force && existsSync(out) && statSync(out).mtimeMs >= Math.max(sdkTime, newestMtime(p.dir))) continue;
      const stderr = [];
      const { error } = await asc.main([
        p.entry, '--config', 'asconfig.json', '--target', 'release', '--outFile', out,
      ], {
        stdout: { write: () => true },
        stderr: { write: (s) => { stderr.push(String(s)); return true; } },
        baseDir: root,
      });
      if (error) throw new Error(`asc failed for ${p.entry}:\n${stderr.join('')}`);
      log(`built ${out.slice(root.length + 1)}`);
      built.push(p.name);
    }
  }
  return built;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  // Test fixtures go to their own folder so they never mix with the built-in plugins.
  const opts = args.includes('--fixtures')
    ? { bases: ['test/fixtures/plugins'], outDir: join(root, 'build', 'test-plugins') }
    : { bases: ['plugins', 'examples'] };
  buildPlugins({ ...opts, force: args.includes('--force') }).catch((err) => {
    console.error(err.message);
    process.exit(1);
  });
}
