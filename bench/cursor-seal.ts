// Cursor sealing cost (client authentication on: runtime/server/cursor-seal.ts), per request, in
// process: the scan of a find reply's top-level fields and the seal of its cursor id; the same for
// a reply to a command that returns no cursor (not scanned); a getMore's unseal beside the peek
// every request already pays; one id alone. With authentication off none of this runs (the
// connection tests one field). Rounds are interleaved and the minimum kept: the machine is shared.
// Run: node --import tsx bench/cursor-seal.ts [--rounds 5]
import { randomBytes } from 'node:crypto';
import { serialize, Long, Timestamp } from 'bson';
import { deriveCursorSeal, sealReply, unsealRequest } from '../runtime/server/cursor-seal.ts';
import { CommandPeek } from '../runtime/wire/index.ts';
import { arg } from './lib.ts';

const ITER = 500_000;
const ROUNDS = Number(arg('--rounds', '5'));

const seal = deriveCursorSeal(randomBytes(32), { db: 'admin', name: 'ann', serverKey: randomBytes(32) });
const time = { clusterTime: new Timestamp({ t: 1, i: 1 }), signature: { hash: Buffer.alloc(20), keyId: 0 } };
const findReply = Buffer.from(serialize({
  cursor: { firstBatch: Array.from({ length: 101 }, (_, i) => ({ _id: i, name: 'x'.repeat(40), n: i })), id: Long.fromBigInt(1234567890123n), ns: 'db.c' },
  ok: 1, $clusterTime: time, operationTime: time.clusterTime,
}));
const insertReply = Buffer.from(serialize({ n: 1, ok: 1, $clusterTime: time, operationTime: time.clusterTime }));
const getMore = Buffer.from(serialize({
  getMore: Long.fromBigInt(1234567890123n), collection: 'c', batchSize: 101, lsid: { id: Buffer.alloc(16) }, $db: 'db',
}));
const peek = new CommandPeek();
const id = Buffer.alloc(8, 7);

const cases: Record<string, () => void> = {
  'find reply (101 documents): scan + seal': () => { sealReply(findReply, 0, 'find', seal, false); },
  'insert reply: not a cursor command': () => { sealReply(insertReply, 0, 'insert', seal, false); },
  'getMore: peek (paid anyway)': () => { peek.read(getMore); },
  'getMore: peek + unseal': () => { peek.read(getMore); unsealRequest(getMore, peek, seal); },
  'one id: seal': () => { seal.sealAt(id, 0); },
};
const best = new Map<string, number>();
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, f] of Object.entries(cases)) {
    for (let i = 0; i < ITER / 10; i++) f();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < ITER; i++) f();
    const ns = Number(process.hrtime.bigint() - t0) / ITER;
    best.set(name, Math.min(best.get(name) ?? Infinity, ns));
  }
}
for (const [name, ns] of best) console.log(`${name.padEnd(44)} ${ns.toFixed(0).padStart(6)} ns`);
