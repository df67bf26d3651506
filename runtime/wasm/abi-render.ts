// Renders the forms of the ABI that are not TypeScript from abi-spec.ts: the AssemblyScript
// declarations (sdk/assembly/abi.ts), the WIT world (sdk/wit/step.wit) and the tables of
// docs/plugins.md's "Host ABI" section. test/wasm/abi.test.ts fails when a committed file differs
// from what this renders. Regenerate with: npm run abi (node --import tsx runtime/wasm/abi-render.ts --write)
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  ABI_VERSION, ABI_VERSION_EXPORT, IMPORT_MODULE, WIT_PACKAGE, WIT_VERSION, ENUMS, HOST_FUNCTIONS, CORE_EXPORTS, WIT_STEP_EXPORTS, LIMITS,
  type CoreType, type EnumSpec, type WitFunction,
} from './abi-spec.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const SDK_ABI_PATH = resolve(ROOT, 'sdk/assembly/abi.ts');
export const WIT_PATH = resolve(ROOT, 'sdk/wit/step.wit');
export const PLUGINS_DOC_PATH = resolve(ROOT, 'docs/plugins.md');
export const DOC_BEGIN = '<!-- BEGIN GENERATED: host ABI (runtime/wasm/abi-spec.ts, `npm run abi`) -->';
export const DOC_END = '<!-- END GENERATED: host ABI -->';

const GENERATED = 'Generated from runtime/wasm/abi-spec.ts by `npm run abi`: edit that file, not this one.';

function members(e: EnumSpec): [string, EnumSpec['members'][string]][] {
  return Object.entries(e.members).sort((a, b) => a[1].value - b[1].value);
}

// ---- AssemblyScript -----------------------------------------------------------------------------

const AS_TYPES: Record<CoreType, string> = { i32: 'i32', u32: 'u32', ptr: 'usize', f64: 'f64' };

export function renderSdkAbi(): string {
  const out: string[] = [
    `// ${GENERATED}`,
    '// The plugin side of the host ABI: the host functions a plugin imports, the enums and the ABI',
    '// version. Plugin code uses the SDK (index.ts) rather than these declarations.',
    '',
    '/** The plugin ABI version this SDK speaks; the host refuses a plugin built for another. */',
    `export const ABI_VERSION: i32 = ${ABI_VERSION};`,
    '/** Exported by every plugin (exports.ts re-exports it) as a constant global: the host reads it at load. */',
    `export const ${ABI_VERSION_EXPORT}: i32 = ABI_VERSION;`,
  ];
  for (const l of LIMITS) out.push(`/** ${l.doc} */`, `export const ${l.name}: i32 = ${l.value};`);
  for (const e of ENUMS) {
    out.push('', `/** ${e.doc} */`, `export const enum ${e.sdkName} {`);
    for (const [name, m] of members(e)) {
      if (m.doc !== undefined) out.push(`  /** ${m.doc} */`);
      out.push(`  ${name} = ${m.value},`);
    }
    out.push('}');
  }
  out.push('');
  for (const f of HOST_FUNCTIONS) {
    if (f.hostAdded === true) continue;
    const params = f.params.map(([n, t]) => `${n}: ${AS_TYPES[t]}`).join(', ');
    out.push(
      `/** ${f.doc} */`,
      '// @ts-ignore: decorator',
      `@external("${IMPORT_MODULE}", "${f.name}")`,
      `export declare function ${f.name}(${params}): ${f.result === null ? 'void' : AS_TYPES[f.result]};`,
    );
  }
  return out.join('\n') + '\n';
}

// ---- WIT ----------------------------------------------------------------------------------------

/** `text` as comment lines of at most ~100 columns, each starting with `prefix`. */
function wrap(text: string, prefix: string): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && prefix.length + line.length + 1 + word.length > 100) {
      lines.push(prefix + line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(prefix + line);
  return lines;
}

function witFunc(f: WitFunction, indent = '  '): string[] {
  const lines: string[] = [];
  if (f.doc !== undefined) lines.push(...wrap(f.doc, `${indent}/// `));
  const params = f.params.map(([n, t]) => `${n}: ${t}`).join(', ');
  lines.push(`${indent}${f.name}: func(${params})${f.result === null ? '' : ` -> ${f.result}`};`);
  return lines;
}

export function renderWit(): string {
  const witEnums = ENUMS.filter((e) => e.wit !== null);
  const out: string[] = [
    `// ${GENERATED}`,
    '// The step contract as a WebAssembly component world: the same host ABI as the core-module path',
    '// (sdk/assembly/abi.ts), for plugins written in other languages. The package version carries the',
    `// plugin ABI version (0.<ABI>.0): the host refuses a component built against another.`,
    '// Loaded by runtime/wasm/component-slot.ts through @bytecodealliance/jco (see the notes at the end).',
    `package ${WIT_PACKAGE}@${WIT_VERSION};`,
    '',
    'interface types {',
  ];
  for (const e of witEnums) {
    if (e.witDoc !== null) out.push(...wrap(e.witDoc, '  /// '));
    out.push(`  enum ${e.wit} { ${members(e).map(([, m]) => m.wit).join(', ')} }`);
  }
  out.push(
    '}',
    '',
    '/// Implemented by the proxy. Every function but `log`, the metric functions, the kv functions',
    '/// and `now-ns` must be called from inside on-request / on-response (otherwise the call traps).',
    'interface host {',
    `  use types.{${witEnums.map((e) => e.wit).join(', ')}};`,
  );
  for (const f of HOST_FUNCTIONS) if (f.wit !== null) out.push(...witFunc(f.wit));
  out.push(
    '}',
    '',
    '/// Implemented by the plugin. Return values mirror the core ABI: 0 = continue, 1 = stop.',
    '/// call-flags: 1 = body replaced by an earlier step, 2 = local reply (response phase),',
    '/// 4 = the command carries document sequences (body-size is then -1: call get-body).',
    'interface step {',
  );
  for (const f of WIT_STEP_EXPORTS) out.push(...witFunc(f));
  out.push(
    '}',
    '',
    'world plugin {',
    '  import host;',
    '  export step;',
    '}',
    '',
    '// Notes on the component path (runtime/wasm/component-slot.ts, docs/components.md):',
    '// - Build from JavaScript with componentize-js: `componentize({ sourcePath, witPath:',
    "//   'sdk/wit/step.wit', worldName: 'plugin', disableFeatures: ['stdio','random','clocks','http',",
    "//   'fetch-event'] })` so that the only import is `proxy:step/host` (scripts/build-components.mjs).",
    '// - The host transpiles a component with jco (`instantiation: \'sync\'`, the WIT host interface',
    '//   mapped to a module the host provides), caches the output by content hash under',
    '//   build/components-cache/, and calls the exports synchronously.',
    '// - A trap in a component call is a step error like a core-module trap: counted, instance rebuilt,',
    '//   on_error applied, crash loops rate-limited. Components are metered like core modules: each',
    '//   core module jco splits out goes through the same binaryen fuel pass (cached per budget) and',
    '//   has its memory capped at max_memory_pages; the host refuels before each step call.',
    '// - Cost: a component call is ~100x a core-module call (see docs); use AssemblyScript core modules',
    '//   for hot steps.',
  );
  return out.join('\n') + '\n';
}

// ---- docs/plugins.md ----------------------------------------------------------------------------

const cell = (s: string): string => s.replace(/\|/g, '\\|');

function docSig(params: readonly (readonly [string, CoreType])[], result: CoreType | null | undefined): string {
  return `\`(${params.map(([n, t]) => `${n}: ${t}`).join(', ')})${result == null ? '' : ` → ${result}`}\``;
}

export function renderDocsAbi(): string {
  const out: string[] = [
    DOC_BEGIN,
    '',
    `**ABI version ${ABI_VERSION}.** A plugin exports the version it was built for (the SDK's exports do: the`,
    `i32 global \`${ABI_VERSION_EXPORT}\`); at load the host refuses a module built for another version,`,
    'naming both, and a module importing anything it does not provide (or with another signature).',
    `Components carry the version in the WIT package: \`${WIT_PACKAGE}@${WIT_VERSION}\`.`,
    'Types: `ptr` is an i32 address in plugin memory, `u32` an i32 read as unsigned.',
    '',
    '**Exports** (only the callbacks present are called):',
    '',
    '| export | signature | |',
    '|---|---|---|',
  ];
  for (const e of CORE_EXPORTS) {
    const s = e.kind === 'function' ? docSig(e.params ?? [], e.result) : e.kind === 'global' ? `global ${e.result}` : e.kind;
    out.push(`| \`${e.name}\` | ${s} | ${cell(e.doc)}${e.required ? ' (required)' : ''} |`);
  }
  out.push('', '**Limits** (the SDK declares them too):', '', '| limit | value | |', '|---|---|---|');
  for (const l of LIMITS) out.push(`| \`${l.name}\` | ${l.value} | ${cell(l.doc)} |`);
  out.push('', `**Imports** (module \`${IMPORT_MODULE}\`):`, '', '| import | signature | |', '|---|---|---|');
  for (const f of HOST_FUNCTIONS) out.push(`| \`${f.name}\` | ${docSig(f.params, f.result)} | ${cell(f.doc)} |`);
  out.push('', '**Enums** (the SDK declares them in `sdk/assembly/abi.ts`; the values are part of the ABI):', '',
    '| enum | value | name | |', '|---|---|---|---|');
  for (const e of ENUMS) {
    const name = e.sdkName === e.name ? `\`${e.name}\`` : `\`${e.name}\` (SDK \`${e.sdkName}\`)`;
    out.push(`| ${name} | | | ${cell(e.doc)} |`);
    for (const [n, m] of members(e)) {
      const kind = 'kind' in m ? `${m.kind === 'both' ? 'string or number' : m.kind}: ` : '';
      out.push(`| | ${m.value} | \`${n}\` | ${kind}${cell(m.doc ?? '')} |`);
    }
  }
  out.push('', DOC_END);
  return out.join('\n');
}

/** docs/plugins.md with its generated section replaced by `section`. */
export function spliceDocs(doc: string, section: string): string {
  const a = doc.indexOf(DOC_BEGIN);
  const b = doc.indexOf(DOC_END);
  if (a < 0 || b < a) throw new Error(`docs/plugins.md has no ${DOC_BEGIN} … ${DOC_END} section`);
  return doc.slice(0, a) + section + doc.slice(b + DOC_END.length);
}

/** Every generated file: path → expected content. */
export function renderAll(): Map<string, string> {
  return new Map([
    [SDK_ABI_PATH, renderSdkAbi()],
    [WIT_PATH, renderWit()],
    [PLUGINS_DOC_PATH, spliceDocs(readFileSync(PLUGINS_DOC_PATH, 'utf8'), renderDocsAbi())],
  ]);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const write = process.argv.includes('--write');
  let stale = 0;
  for (const [path, text] of renderAll()) {
    let old = '';
    try { old = readFileSync(path, 'utf8'); } catch { /* new file */ }
    if (old === text) continue;
    stale++;
    if (write) writeFileSync(path, text);
    console.log(`${write ? 'wrote' : 'stale'} ${path.slice(ROOT.length + 1)}`);
  }
  if (!write && stale > 0) process.exit(1);
}
