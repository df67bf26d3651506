// Tests of the AssemblyScript BSON SDK (sdk/assembly/bson) against the `bson` npm package.
// The harness module test/sdk/bson-harness/assembly/index.ts is compiled here with the asc
// programmatic API (output kept in memory), then driven through plain WebAssembly exports.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import asc from 'assemblyscript/asc';
import { BSON, EJSON, Binary, Double, Int32, Long, ObjectId } from 'bson';
// @ts-ignore — plain ESM script without types
import * as corpusGen from '../fixtures/bson-corpus/generate.mjs';

const gen = corpusGen as {
  buildCorpus(): Record<string, Buffer>;
  buildIndex(c: Record<string, Buffer>): CorpusEntry[];
  describeValue(v: unknown, name: string): unknown;
  expectedReads(doc: unknown): { path: string; expect: unknown }[];
  MISSING_PATHS: string[];
  DESERIALIZE: Record<string, boolean>;
};

interface CorpusEntry { name: string; file: string; length: number; reads: { path: string; expect: unknown }[] }

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const corpusDir = join(root, 'test', 'fixtures', 'bson-corpus');

type Exports = Record<string, (...a: any[]) => any> & { memory: WebAssembly.Memory };

let wasmModule: WebAssembly.Module;
let compileMs = 0;

async function compileHarness(): Promise<Uint8Array> {
  let binary: Uint8Array | null = null;
  let errText = '';
  const t0 = performance.now();
  const { error } = await asc.main([
    join(here, 'bson-harness', 'assembly', 'index.ts'),
    '--config', join(here, 'bson-harness', 'asconfig.json'),
    '--outFile', 'harness.wasm',
  ], {
    writeFile(name: string, contents: Uint8Array | string) {
      if (name.endsWith('.wasm')) binary = contents as Uint8Array;
    },
    stderr: { write(s: string | Uint8Array) { errText += String(s); return true; } } as any,
    stdout: { write() { return true; } } as any,
  });
  compileMs = performance.now() - t0;
  if (error) throw new Error(`asc failed: ${error.message}\n${errText}`);
  if (!binary) throw new Error('asc produced no wasm');
  return binary;
}

/** A fresh instance of the compiled harness with the marshalling helpers. */
class Harness {
  ex: Exports;
  constructor() {
    let mem: WebAssembly.Memory;
    const readStr = (p: number) => {
      if (!p) return '';
      const len = new DataView(mem.buffer).getUint32(p - 4, true);
      return Buffer.from(mem.buffer, p, len).toString('utf16le');
    };
    const inst = new WebAssembly.Instance(wasmModule, {
      env: {
        abort(msg: number, file: number, line: number, col: number) {
          throw new Error(`AS abort: ${readStr(msg)} (${readStr(file)}:${line}:${col})`);
        },
      },
    });
    this.ex = inst.exports as unknown as Exports;
    mem = this.ex.memory;
  }
  put(slot: number, bytes: Uint8Array | string) {
    const b = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
    const p = this.ex.alloc(slot, b.length) as number;
    new Uint8Array(this.ex.memory.buffer, p, b.length).set(b);
  }
  out(len: number): Buffer {
    const p = this.ex.outPtr() as number;
    return Buffer.from(new Uint8Array(this.ex.memory.buffer, p, len).slice());
  }
  /** Calls `fn` with slot 0 = doc, 1 = path, 2 = extra; returns bytes, or the negative code. */
  call(fn: string, doc: Uint8Array, path = '', extra: Uint8Array | string = '', ...args: unknown[]): Buffer | number {
    this.put(0, doc);
    this.put(1, path);
    this.put(2, extra);
    const n = this.ex[fn](...args) as number;
    return n < 0 ? n : this.out(n);
  }
  /** Like call() for exports that return a plain number (validate, walk). */
  num(fn: string, doc: Uint8Array, ...args: unknown[]): number {
    this.put(0, doc);
    return this.ex[fn](...args) as number;
  }
  json(fn: string, doc: Uint8Array, path = ''): unknown {
    const r = this.call(fn, doc, path);
    return typeof r === 'number' ? r : JSON.parse(r.toString('utf8'));
  }
}

let h: Harness;
const corpus: Record<string, Buffer> = {};
let index: CorpusEntry[];

before(async () => {
  wasmModule = new WebAssembly.Module(new Uint8Array(await compileHarness()));
  h = new Harness();
  index = JSON.parse(readFileSync(join(corpusDir, 'index.json'), 'utf8'));
  for (const e of index) corpus[e.name] = readFileSync(join(corpusDir, e.file));
});

test('harness compiles with asc (incremental runtime) and imports only env.abort', (t) => {
  t.diagnostic(`asc compile of the BSON harness: ${compileMs.toFixed(0)} ms`);
  const imports = WebAssembly.Module.imports(wasmModule).map((i) => `${i.module}.${i.name}`);
  assert.deepEqual(imports, ['env.abort']);
});

test('corpus files are what generate.mjs produces', () => {
  const fresh = gen.buildCorpus();
  assert.deepEqual(Object.keys(fresh).sort(), Object.keys(corpus).sort());
  for (const [name, bytes] of Object.entries(fresh)) assert.ok(bytes.equals(corpus[name]), `${name}.bson is stale`);
  assert.deepEqual(gen.buildIndex(fresh), index, 'index.json is stale: run node test/fixtures/bson-corpus/generate.mjs');
});

test('round-trip through the AS writer is byte-identical (typed writes and raw element copies)', () => {
  for (const [name, bytes] of Object.entries(corpus)) {
    for (const mode of [0, 1]) {
      const r = h.call('roundtrip', bytes, '', '', mode);
      assert.ok(typeof r !== 'number', `${name} mode ${mode}: code ${r}`);
      assert.ok(r.equals(bytes), `${name} mode ${mode}: bytes differ`);
    }
  }
});

test('field reads by path match bson deserialize (type and value)', () => {
  let n = 0;
  for (const e of index) {
    const bytes = corpus[e.name];
    const live = gen.expectedReads(BSON.deserialize(bytes, gen.DESERIALIZE));
    for (const { path, expect } of e.reads) {
      assert.deepEqual(live.find((r) => r.path === path)?.expect, expect, `index.json vs bson for ${e.name}:${path}`);
      assert.deepEqual(h.json('readPath', bytes, path), expect, `${e.name}:${path}`);
      n++;
    }
    for (const p of gen.MISSING_PATHS) assert.equal(h.json('readPath', bytes, p), -1, `${e.name}:${p} should be missing`);
    const keys = Object.keys(BSON.deserialize(bytes, gen.DESERIALIZE)).map((k) => Buffer.from(k).toString('hex'));
    assert.deepEqual(h.json('keysAt', bytes, ''), keys, `${e.name} keys`);
  }
  assert.ok(n > 300, `only ${n} reads`);
});

test('paths: numeric segments index arrays by position, not found cases', () => {
  const doc = BSON.serialize({ a: [{ b: [10, 20, { c: 'deep' }] }], 'x.y': 1, n: 5 });
  assert.deepEqual(h.json('readPath', doc, 'a.0.b.2.c'), gen.describeValue('deep', 'c'));
  assert.deepEqual(h.json('readPath', doc, 'a.0.b.1'), gen.describeValue(new Int32(20), '1'));
  for (const p of ['a.1', 'a.0.b.3', 'a.x', 'n.0', 'x.y', '', 'a.', '.a', 'a.-0', 'a.00']) {
    assert.equal(h.json('readPath', doc, p), -1, `path ${JSON.stringify(p)}`);
  }
  assert.deepEqual(h.json('keysAt', doc, 'a.0.b'), ['30', '31', '32']);
});

test('writer: every type matches bson.serialize byte for byte', () => {
  const r = h.call('buildAll', new Uint8Array(0));
  assert.ok(typeof r !== 'number');
  const dec = new Uint8Array(16); dec[0] = 1; dec[15] = 0x30;
  const expected = BSON.serialize({
    d: new Double(-0),
    s: 'héllo ✓ 𝄞',
    doc: { x: new Int32(1) },
    arr: [new Int32(1), 'two', {}],
    bin: new Binary(Buffer.from([1, 2, 255]), 0),
    oid: new ObjectId('0123456789abcdef01234567'),
    t: true,
    date: new Date(1700000000123),
    nul: null,
    re: new BSON.BSONRegExp('^a.*b$', 'im'),
    i32: new Int32(-2147483648),
    ts: new BSON.Timestamp({ t: 4294967295, i: 7 }),
    i64: Long.fromString('9223372036854775807'),
    dec: new BSON.Decimal128(dec),
    min: new BSON.MinKey(),
    max: new BSON.MaxKey(),
  });
  assert.equal(Buffer.from(r).toString('hex'), Buffer.from(expected).toString('hex'));
});

// --- edits -----------------------------------------------------------------------------------

const base = () => ({
  a: { b: new Int32(1), c: 'x' },
  arr: [{ n: new Int32(1) }, { n: new Int32(2) }],
  s: 'secret',
  z: true,
});

function expectEdit(fn: string, doc: object, path: string, extra: Uint8Array | string, args: unknown[], expected: object | number) {
  const r = h.call(fn, BSON.serialize(doc), path, extra, ...args);
  if (typeof expected === 'number') {
    assert.equal(r, expected, `${fn}(${path}) should fail with ${expected}`);
    return;
  }
  assert.ok(typeof r !== 'number', `${fn}(${path}) failed with ${r}`);
  const got = BSON.deserialize(r, gen.DESERIALIZE);
  const canon = (x: unknown) => EJSON.stringify(x as any, { relaxed: false });
  assert.equal(canon(got), canon(BSON.deserialize(BSON.serialize(expected), gen.DESERIALIZE)), `${fn}(${path})`);
  assert.ok(r.equals(Buffer.from(BSON.serialize(expected))), `${fn}(${path}) bytes`);
}

test('set: replace in place, append, create intermediates, arrays, every setter', () => {
  const b = base();
  expectEdit('setString', b, 'a.c', 'y', [], { ...b, a: { b: new Int32(1), c: 'y' } });
  expectEdit('setString', b, 'a.new', 'v', [], { ...b, a: { b: new Int32(1), c: 'x', new: 'v' } });
  expectEdit('setI32', b, 'x.y.z', '', [7], { ...b, x: { y: { z: new Int32(7) } } });
  expectEdit('setI64', b, 'arr.1.n', '', [9n], { ...b, arr: [{ n: new Int32(1) }, { n: Long.fromNumber(9) }] });
  expectEdit('setI64', b, 'big', '', [-9223372036854775808n], { ...b, big: Long.fromString('-9223372036854775808') });
  expectEdit('setF64', b, 'arr.3', '', [-0], { ...b, arr: [{ n: new Int32(1) }, { n: new Int32(2) }, null, new Double(-0)] });
  expectEdit('setF64', b, 'arr.0.m', '', [1.5], { ...b, arr: [{ n: new Int32(1), m: new Double(1.5) }, { n: new Int32(2) }] });
  expectEdit('setBool', b, 'z', '', [0], { ...b, z: false });
  expectEdit('setNull', b, 'a.b', '', [], { ...b, a: { b: null, c: 'x' } });
  expectEdit('setDoc', b, 'a.sub', BSON.serialize({ k: 'v', l: [1] }), [], { ...b, a: { b: new Int32(1), c: 'x', sub: { k: 'v', l: [new Int32(1)] } } });
  expectEdit('setDoc', b, 's', BSON.serialize({}), [], { ...b, s: {} });
  expectEdit('setDate', b, 'when.at', '', [1700000000000n], { ...b, when: { at: new Date(1700000000000) } });
  expectEdit('setString', { 'ключ': 'a', 'é': { 'ü': 1 } }, 'é.ü', '✓', [], { 'ключ': 'a', 'é': { 'ü': '✓' } });
  expectEdit('setString', {}, 'new.0.k', 'v', [], { new: { 0: { k: 'v' } } });
  // failures: through a scalar, non-numeric array segment, bad paths, raw value not a document
  expectEdit('setString', b, 's.x', 'v', [], -1);
  expectEdit('setString', b, 'arr.x', 'v', [], -1);
  for (const p of ['', 'a..b', 'a.', '.a']) expectEdit('setString', b, p, 'v', [], -1);
  expectEdit('setDoc', b, 'q', Buffer.from([5, 0, 0, 0, 1]), [], -1);
});

test('unset, rename, redact', () => {
  const b = base();
  expectEdit('unset', b, 'a.b', '', [], { ...b, a: { c: 'x' } });
  expectEdit('unset', b, 's', '', [], { a: b.a, arr: b.arr, z: true });
  expectEdit('unset', b, 'arr.0', '', [], { ...b, arr: [null, { n: new Int32(2) }] });
  expectEdit('unset', b, 'arr.1.n', '', [], { ...b, arr: [{ n: new Int32(1) }, {}] });
  expectEdit('unset', b, 'missing.path', '', [], b);
  expectEdit('unset', b, 'a.c.deeper', '', [], b);
  expectEdit('rename', b, 'a.b', 'bb', [], { ...b, a: { bb: new Int32(1), c: 'x' } });
  expectEdit('rename', b, 'a.b', 'c', [], { ...b, a: { c: new Int32(1) } });
  expectEdit('rename', b, 'a.c', 'b', [], { ...b, a: { b: 'x' } });
  expectEdit('rename', b, 'a.zz', 'c', [], b);
  expectEdit('rename', b, 's', 'sécret', [], { a: b.a, arr: b.arr, 'sécret': 'secret', z: true });
  expectEdit('rename', b, 'arr.0', 'x', [], -1);
  expectEdit('rename', b, 'a.b', 'x.y', [], -1);
  expectEdit('redact', b, 's', '***', [], { ...b, s: '***' });
  expectEdit('redact', b, 'a', '[redacted]', [], { ...b, a: '[redacted]' });
  expectEdit('redact', b, 'arr.1.n', '', [], { ...b, arr: [{ n: new Int32(1) }, { n: '' }] });
  expectEdit('redact', b, 'nope', 'x', [], b);
});

test('edits on real commands from the corpus', () => {
  const find = BSON.deserialize(corpus['find'], gen.DESERIALIZE) as any;
  const r = h.call('redact', corpus['find'], 'filter.address.city', '***');
  assert.deepEqual(r, Buffer.from(BSON.serialize(find)), 'dotted key is not a path: unchanged');
  const r2 = h.call('redact', corpus['find'], 'lsid.id', 'x') as Buffer;
  assert.equal((BSON.deserialize(r2) as any).lsid.id, 'x');
  const r3 = h.call('setI32', corpus['find'], 'limit', '', 5) as Buffer;
  assert.equal((BSON.deserialize(r3) as any).limit, 5);
  const r4 = h.call('unset', corpus['insert'], 'documents.0.customer.email') as Buffer;
  const ins = BSON.deserialize(r4) as any;
  assert.deepEqual(Object.keys(ins.documents[0].customer), ['name']);
  const r5 = h.call('setString', corpus['getmore-reply'], 'cursor.nextBatch.2.name', 'redacted') as Buffer;
  assert.equal((BSON.deserialize(r5) as any).cursor.nextBatch[2].name, 'redacted');
  assert.equal((BSON.deserialize(r5) as any).cursor.nextBatch.length, 3);
});

// --- malformed input -------------------------------------------------------------------------

function le32(n: number) { const b = Buffer.alloc(4); b.writeInt32LE(n); return b; }
function frame(body: Buffer) { return Buffer.concat([le32(body.length + 5), body, Buffer.from([0])]); }

/** Runs every entry point on `bytes`; none may trap. Returns the result codes. */
function probe(bytes: Uint8Array) {
  const res = {
    validate: h.num('validate', bytes, 0),
    walk: h.num('walk', bytes),
    roundtrip: h.call('roundtrip', bytes, '', '', 0),
    read: h.call('readPath', bytes, 'b'),
    readDeep: h.call('readPath', bytes, 'a.b.0'),
    unset: h.call('unset', bytes, 'zz'),
    set: h.call('setI32', bytes, 'a.b', '', 1),
    redact: h.call('redact', bytes, 'a', 'x'),
  };
  return res;
}

test('malformed documents are refused without trapping', () => {
  const okElem = Buffer.concat([Buffer.from([0x10]), Buffer.from('a\0'), le32(1)]);
  const frameBad: [string, Buffer][] = [
    ['empty buffer', Buffer.alloc(0)],
    ['4 bytes', le32(4)],
    ['length 4', Buffer.concat([le32(4), Buffer.from([0])])],
    ['length larger than buffer', Buffer.concat([le32(100), okElem, Buffer.from([0])])],
    ['negative length', Buffer.concat([le32(-5), Buffer.from([0])])],
    ['huge length', Buffer.concat([le32(0x7fffffff), Buffer.from([0])])],
    ['missing terminator', Buffer.concat([le32(okElem.length + 5), okElem, Buffer.from([1])])],
  ];
  for (const [what, bytes] of frameBad) {
    const r = probe(bytes);
    for (const [k, v] of Object.entries(r)) assert.equal(v, -2, `${what}: ${k}`);
  }
  const elemBad: [string, Buffer][] = [
    ['string length too large', frame(Buffer.concat([Buffer.from([2]), Buffer.from('a\0'), le32(50), Buffer.from('hi\0')]))],
    ['string length zero', frame(Buffer.concat([Buffer.from([2]), Buffer.from('a\0'), le32(0), Buffer.from('\0')]))],
    ['string length negative', frame(Buffer.concat([Buffer.from([2]), Buffer.from('a\0'), le32(-3), Buffer.from('hi\0')]))],
    ['string without NUL', frame(Buffer.concat([Buffer.from([2]), Buffer.from('a\0'), le32(3), Buffer.from('hij')]))],
    ['inner doc longer than parent', frame(Buffer.concat([Buffer.from([3]), Buffer.from('a\0'), le32(40), okElem, Buffer.from([0])]))],
    ['inner doc length < 5', frame(Buffer.concat([Buffer.from([3]), Buffer.from('a\0'), le32(3), Buffer.from([0, 0])]))],
    ['inner doc missing terminator', frame(Buffer.concat([Buffer.from([3]), Buffer.from('a\0'), le32(okElem.length + 5), okElem, Buffer.from([7])]))],
    ['unknown type', frame(Buffer.concat([Buffer.from([0x20]), Buffer.from('a\0'), le32(1)]))],
    ['name without NUL', frame(Buffer.from([0x10, 0x61, 0x62, 0x63]))],
    ['int32 cut short', frame(Buffer.concat([Buffer.from([0x10]), Buffer.from('a\0'), Buffer.from([1, 0])]))],
    ['binary length too large', frame(Buffer.concat([Buffer.from([5]), Buffer.from('a\0'), le32(99), Buffer.from([0, 1, 2])]))],
    ['binary negative length', frame(Buffer.concat([Buffer.from([5]), Buffer.from('a\0'), le32(-1), Buffer.from([0, 1, 2])]))],
    ['regex without options NUL', frame(Buffer.concat([Buffer.from([0x0b]), Buffer.from('a\0'), Buffer.from('abc\0im')]))],
    ['early terminator', Buffer.concat([le32(okElem.length * 2 + 6), okElem, Buffer.from([0]), okElem, Buffer.from([0])])],
    ['after a good element', frame(Buffer.concat([okElem, Buffer.from([0x02]), Buffer.from('b\0'), le32(1000)]))],
  ];
  for (const [what, bytes] of elemBad) {
    const r = probe(bytes);
    assert.throws(() => BSON.deserialize(bytes), Error, `${what}: bson should refuse it too`);
    assert.equal(r.validate, 0, `${what}: validate`);
    assert.equal(r.walk, -1, `${what}: walk`);
    assert.equal(r.roundtrip, -1, `${what}: roundtrip`);
    assert.equal(r.read, -1, `${what}: read`);
    assert.equal(r.unset, -1, `${what}: unset`);
  }
  // the instance is still healthy
  assert.ok((h.call('roundtrip', corpus['find'], '', '', 0) as Buffer).equals(corpus['find']));
});

test('every truncation of every corpus document is refused or agrees with bson', () => {
  let n = 0;
  for (const [name, bytes] of Object.entries(corpus)) {
    const step = bytes.length > 2000 ? 97 : 1;
    for (let cut = 0; cut < bytes.length; cut += step) {
      const t = bytes.subarray(0, cut);
      assert.equal(h.num('validate', t, 0), -2, `${name} cut ${cut}`);
      assert.equal(h.num('walk', t), -2);
      if (cut >= 5) {
        // re-framed: the length prefix says `cut` bytes and the last byte is a terminator
        const f = Buffer.from(t);
        f.writeInt32LE(cut, 0);
        f[cut - 1] = 0;
        let bsonOk = true;
        try { BSON.deserialize(f, { validation: { utf8: false } }); } catch { bsonOk = false; }
        const v = h.num('validate', f, 0);
        assert.equal(v, bsonOk ? 1 : 0, `${name} re-framed at ${cut}: AS ${v}, bson ok ${bsonOk}`);
        probe(f);
      }
      n++;
    }
  }
  assert.ok(n > 1000);
});

test('random corruption never traps the module', () => {
  let seed = 12345;
  const rnd = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed; };
  const docs = Object.values(corpus).filter((b) => b.length < 2000);
  for (let k = 0; k < 3000; k++) {
    const src = docs[k % docs.length];
    const b = Buffer.from(src);
    const flips = 1 + (rnd() % 4);
    for (let j = 0; j < flips; j++) b[rnd() % b.length] = rnd() & 0xff;
    probe(b);
  }
  assert.ok((h.call('roundtrip', corpus['aggregate'], '', '', 1) as Buffer).equals(corpus['aggregate']));
});

test('wrong-type getter and writer misuse abort with a clear error (then the instance is replaced)', () => {
  const fresh = new Harness();
  fresh.put(0, BSON.serialize({ b: 'str' }));
  assert.throws(() => fresh.ex.misuse(0), /AS abort: BSON: asI32 on type 0x2/);
  const fresh2 = new Harness();
  assert.throws(() => fresh2.ex.misuse(1), /AS abort: BSON writer: end without start/);
});
