// The proxy's logger: structured records from plugins (pre-encoded members) come out as one flat
// JSON object per line in the json format and after the usual head in the pretty format, through
// the batching fd sink as well as a plain string sink; disabled levels write nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger, BufferedFdSink } from '../../runtime/log/index.ts';

const members = (s: string) => new TextEncoder().encode(s);

test('record: json lines through the batching fd sink, flat fields, in order with plain lines', () => {
  const dir = mkdtempSync(join(tmpdir(), 'logger-'));
  const file = join(dir, 'out.log');
  const fd = openSync(file, 'w');
  try {
    const sink = new BufferedFdSink(fd);
    const log = new Logger('pipeline', 'info', 'json', sink);
    log.record('info', '"step":"wasm:x","pipeline":"p",', members('"op":"find","n":1,"s":"é"'));
    log.info('plain', { a: 1 });
    log.record('debug', '"step":"wasm:x","pipeline":"p",', members('"dropped":true'));
    // a record longer than the sink's buffer is written whole
    const long = 'x'.repeat(100_000);
    log.record('warn', '"step":"wasm:x","pipeline":"p",', members(`"long":"${long}"`));
    sink.flush();
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 3);
    assert.equal(lines[0]!.level, 'info');
    assert.equal(lines[0]!.logger, 'pipeline');
    assert.equal(lines[0]!.step, 'wasm:x');
    assert.equal(lines[0]!.op, 'find');
    assert.equal(lines[0]!.s, 'é');
    assert.equal(typeof lines[0]!.time, 'string');
    assert.equal(lines[1]!.msg, 'plain');
    assert.equal(lines[2]!.level, 'warn');
    assert.equal((lines[2]!.long as string).length, 100_000);
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('record: pretty format and a sink without writeRecord', () => {
  const out: string[] = [];
  const log = new Logger('pipeline', 'trace', 'pretty', { write: (l) => { out.push(l); } });
  log.record('trace', '"step":"wasm:x",', members('"op":"find"'));
  assert.equal(out.length, 1);
  assert.match(out[0]!, /^\d{4}-\d\d-\d\dT[\d:.]+Z TRACE pipeline \{"step":"wasm:x","op":"find"\}\n$/);
  const json: string[] = [];
  new Logger('l', 'info', 'json', { write: (l) => { json.push(l); } }).record('error', '', members('"k":2'));
  assert.equal(JSON.parse(json[0]!).k, 2);
});
