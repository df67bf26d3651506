// Every ```yaml block of README.md and the hand-written docs is something a reader can paste:
// a whole configuration (it loads, and every pipeline it describes starts: each plugin accepts its
// config), an entry of `steps` (docs/steps.md's `name: { config: … }` lines: loaded under `steps`
// in a pipeline that runs them), a copy of a file (`# examples/…` first: the same YAML as the file),
// or one of the few blocks listed below that are not proxy configuration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { execFileSync } from 'node:child_process';
import { parse } from 'yaml';
import { parseConfigText } from '../../runtime/config/index.ts';
import { PipelineManager } from '../../runtime/pipeline/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';
import { pipelineConfigs } from '../../runtime/app/pipelines.ts';

// Blocks that are not proxy configuration, by their first line.
const NOT_CONFIG = new Map([
  ['# Kubernetes', 'probes of a Kubernetes pod spec (docs/operations.md)'],
]);

const RESPONSE_ONLY = new Set(['logging', 'metrics']);

interface Block { file: string; line: number; text: string }

function yamlBlocks(): Block[] {
  const files = ['README.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];
  const blocks: Block[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^( *)```ya?ml\n([\s\S]*?)^ *```$/gm)) {
      const indent = m[1]!.length;
      const body = m[2]!.split('\n').map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length))).join('\n');
      blocks.push({ file, line: text.slice(0, m.index).split('\n').length, text: body });
    }
  }
  return blocks;
}

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };
const builtins = new Set(readdirSync('plugins').filter((d) => existsSync(join('plugins', d, 'assembly', 'index.ts'))));

/** Null when `text` loads as a configuration and its pipelines start, else the reason. */
async function startsPipelines(text: string, where: string): Promise<string | null> {
  try {
    const config = parseConfigText(text, `${where}.yaml`);
    const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR, logger: quiet });
    for (const c of pipelineConfigs(config)) await manager.load(c);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

test('every yaml block of README.md and docs/ loads as what it shows', { timeout: 300_000 }, async () => {
  execFileSync(process.execPath, ['scripts/build-plugins.mjs'], { stdio: 'inherit' });
  execFileSync(process.execPath, ['scripts/build-components.mjs'], { stdio: 'inherit' });
  const blocks = yamlBlocks();
  assert.ok(blocks.length > 20, `found ${blocks.length} yaml blocks`);
  const seen = new Set<string>();
  const failures: string[] = [];
  for (const b of blocks) {
    const where = `${b.file}:${b.line}`;
    const first = b.text.split('\n')[0]!.trim();
    if (NOT_CONFIG.has(first)) { seen.add(first); continue; }
    const copy = /^# (examples\/\S+\.ya?ml)$/.exec(first);
    if (copy !== null) {
      if (!isDeepStrictEqual(parse(b.text), parse(readFileSync(copy[1]!, 'utf8')))) failures.push(`${where}: not what ${copy[1]} holds`);
      continue;
    }
    let top: unknown;
    try {
      top = parse(b.text);
    } catch (err) {
      failures.push(`${where}: ${(err as Error).message}`);
      continue;
    }
    if (top === null || typeof top !== 'object') { failures.push(`${where}: not a YAML mapping`); continue; }
    const keys = Object.keys(top as object);
    // `auth` is a key of both: a block of step names that loads under `steps` is an entry of it.
    if (keys.every((k) => builtins.has(k))) {
      // Each step in the phase it works in (response for those that only time or log the reply).
      const response = keys.filter((k) => RESPONSE_ONLY.has(k));
      const request = keys.filter((k) => !response.includes(k));
      const indented = b.text.split('\n').map((l) => `  ${l}`).join('\n');
      const asSteps = `pipeline:\n  request: ${JSON.stringify(request)}\n  response: ${JSON.stringify(response)}\nsteps:\n${indented}\n`;
      if (await startsPipelines(asSteps, where) === null) continue;
    }
    const err = await startsPipelines(b.text, where);
    if (err !== null) failures.push(`${where}: ${err}`);
  }
  assert.deepEqual(failures, []);
  for (const k of NOT_CONFIG.keys()) assert.ok(seen.has(k), `no yaml block starts with ${k} any more: remove it from NOT_CONFIG`);
});
