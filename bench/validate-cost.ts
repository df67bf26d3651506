// What whole-request validation (runtime/wire/bson-validate.ts) adds per request, against what the
// request path already does with the same bytes: the command peek (CommandPeek.read: name, $db,
// collection, session fields). Inputs: every uncompressed OP_MSG captured from the Node driver,
// PyMongo and mongosh (test/fixtures/wire), plus a 100-document insert batch (document sequence).
// Both are timed in the same run, interleaved, median of rounds; the figure that counts is the ratio.
//
// Usage: node --import tsx bench/validate-cost.ts [--rounds 7]
import { performance } from 'node:perf_hooks';
import { serialize } from 'bson';
import { CommandPeek, parseOpMsg, validateDocument, validateDocuments, OP_MSG } from '../runtime/wire/index.ts';
import { fixtureFrame, fixtureIndex } from '../test/wire/fixtures.ts';
import { arg, median } from './lib.ts';

const rounds = Number(arg('--rounds', '7'));
const ITER = 20_000;

const msgs = fixtureIndex()
  .filter((e) => e.opcode === 'OP_MSG' && e.compressor === null)
  .map((e) => parseOpMsg(fixtureFrame(e.file)))
  .filter((m) => m.body.length > 0);
const batch = Buffer.concat(Array.from({ length: 100 }, (_, i) => Buffer.from(serialize({ _id: i, name: `user ${i}`, email: `u${i}@example.com`,
  tags: ['a', 'b'], at: new Date(0) }))));

function timePeek(): number {
  const peek = new CommandPeek();
  const t0 = performance.now();
  for (let k = 0; k < ITER; k++) for (const m of msgs) peek.read(m.body);
  return ((performance.now() - t0) * 1e6) / (ITER * msgs.length);
}

function timeValidate(): number {
  const t0 = performance.now();
  for (let k = 0; k < ITER; k++) {
    for (const m of msgs) {
      validateDocument(m.body, 0, m.body.length);
      if (m.sequences !== null) for (const s of m.sequences) validateDocuments(s.payload, 0, s.payload.length);
    }
  }
  return ((performance.now() - t0) * 1e6) / (ITER * msgs.length);
}

function timeBatch(): number {
  const n = ITER / 20;
  const t0 = performance.now();
  for (let k = 0; k < n; k++) validateDocuments(batch, 0, batch.length);
  return ((performance.now() - t0) * 1e6) / n;
}

const peek: number[] = [];
const val: number[] = [];
const big: number[] = [];
timePeek(); timeValidate(); timeBatch(); // warm-up
for (let r = 0; r < rounds; r++) {
  peek.push(timePeek());
  val.push(timeValidate());
  big.push(timeBatch());
}
const p = median(peek);
const v = median(val);
console.log(`captured commands: ${msgs.length} OP_MSG bodies (opcode ${OP_MSG}), median of ${rounds} rounds`);
console.log(`  command peek (baseline, already on the path): ${p.toFixed(0)} ns/request`);
console.log(`  whole-request validation:                     ${v.toFixed(0)} ns/request (${(v / p).toFixed(2)}x the peek)`);
console.log(`  100-document insert batch (${batch.length} bytes): ${median(big).toFixed(0)} ns (${(median(big) / batch.length).toFixed(2)} ns/byte)`);
