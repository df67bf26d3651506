// One level table (runtime/log/levels.ts), one log type (runtime/log/log.ts): the configuration
// schema, the admin API's level filter, `proxy logs --level` and the plugin ABI's level numbers all
// use the table; no other file of runtime/ writes the levels out, declares its own log interface,
// or logs with the fields before the message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LOG_LEVELS, LOG_LEVEL_VALUES, Logger, LogRing, type LogLevel } from '../../runtime/log/index.ts';
import { ringOnlyAdminApp } from '../helpers/admin-surface.ts';
import { parseConfig, ConfigError } from '../../runtime/config/index.ts';
import { LOG_LEVEL_NAMES, AbiLogLevel } from '../../runtime/wasm/abi.ts';
import { runLogs, LogsError } from '../../runtime/cli/logs.ts';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && /\.(ts|mts|mjs)$/.test(d.name))
    .map((d) => join(d.parentPath, d.name));
}

test('the levels, lowest first, with pino\'s numbers', () => {
  assert.deepEqual([...LOG_LEVELS], ['trace', 'debug', 'info', 'warn', 'error']);
  const values = LOG_LEVELS.map((l) => LOG_LEVEL_VALUES[l]);
  assert.deepEqual(values, [...values].sort((a, b) => a - b));
  assert.deepEqual(Object.keys(LOG_LEVEL_VALUES), [...LOG_LEVELS]);
});

test('the plugin ABI\'s level numbers map to the level names in order', () => {
  assert.deepEqual([...LOG_LEVEL_NAMES], [...LOG_LEVELS]);
  assert.deepEqual(Object.values(AbiLogLevel), [0, 1, 2, 3, 4]);
});

test('the schema takes exactly the table\'s levels for log.level', () => {
  for (const level of LOG_LEVELS) assert.equal(parseConfig({ log: { level } }, null).log.level, level);
  assert.throws(() => parseConfig({ log: { level: 'fatal' } }, null), (e: unknown) => e instanceof ConfigError && /log\.level/.test(e.message));
});

test('`proxy logs --level` takes the table\'s levels and names them when refusing', async () => {
  await assert.rejects(runLogs({ level: 'loud', url: 'http://127.0.0.1:9' }), (e: unknown) => e instanceof LogsError && e.message === `--level ` +
    `must be one of ${LOG_LEVELS.join(', ')}`);
  // An inherited property of an object is not a level.
  await assert.rejects(runLogs({ level: 'toString', url: 'http://127.0.0.1:9' }), LogsError);
});

test('a Logger writes each level at or above its own, with the level name', () => {
  for (const min of LOG_LEVELS) {
    const lines: string[] = [];
    const log = new Logger('t', min, 'json', { write: (l) => lines.push(l) });
    for (const l of LOG_LEVELS) log[l as LogLevel]('m', { k: 1 });
    const written = lines.map((l) => (JSON.parse(l) as { level: string }).level);
    assert.deepEqual(written, LOG_LEVELS.filter((l) => LOG_LEVEL_VALUES[l] >= LOG_LEVEL_VALUES[min]));
  }
});

test('no other file of runtime/ writes the level list out, or declares its own log interface', () => {
  const found: string[] = [];
  for (const file of sources('runtime')) {
    if (file === join('runtime', 'log', 'levels.ts')) continue;
    const text = readFileSync(file, 'utf8');
    if (/['"]trace['"],\s*['"]debug['"],\s*['"]info['"]/.test(text) || /trace:\s*10\b/.test(text)) found.push(`${file}: a level table`);
    for (const m of text.matchAll(/interface (\w*Log(?:ger)?)\b/g)) if (m[1] !== 'Log') found.push(`${file}: interface ${m[1]}`);
  }
  assert.deepEqual(found, []);
});

test('every log call gives the message first, then the fields', () => {
  const found: string[] = [];
  for (const dir of ['runtime', 'sdk', 'bench']) {
    for (const file of sources(dir)) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\b(?:log|logger|\w+Log)\??\.(?:trace|debug|info|warn|error)\(\s*\{/g)) {
        found.push(`${file}:${text.slice(0, m.index).split('\n').length}`);
      }
    }
  }
  assert.deepEqual(found, []);
});

test('the admin API\'s level filter (GET /api/v1/logs?level=) takes the table\'s levels and keeps the lines at or above', async () => {
  const ring = new LogRing(100);
  const log = new Logger('t', 'trace', 'json', { write() {} }, ring);
  for (const l of LOG_LEVELS) log[l](`at ${l}`);
  const app = ringOnlyAdminApp(ring, 'admin-token-0123456789');
  try {
    const get = (level: string) => app.inject({ url: `/api/v1/logs?tail=100&follow=false&level=${level}`,
      headers: { authorization: 'Bearer admin-token-0123456789' } });
    for (const [i, level] of LOG_LEVELS.entries()) {
      const r = await get(level);
      assert.equal(r.statusCode, 200, level);
      const levels = r.body.split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as { level: string }).level);
      assert.deepEqual(levels, LOG_LEVELS.slice(i), level);
    }
    for (const bad of ['loud', 'toString', 'constructor']) {
      const r = await get(bad);
      assert.equal(r.statusCode, 400, bad);
      assert.match(r.body, new RegExp(`level must be one of ${LOG_LEVELS.join(', ')}`));
    }
  } finally {
    await app.close();
  }
});
