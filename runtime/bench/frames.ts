// The OP_MSG frames the load generator sends. Built once per connection with the `bson` encoder
// (not on the measured path); per send only the requestID bytes (offset 4) are patched.
import { serialize, type Document } from 'bson';
import { encodeOpMsg } from '../wire/index.ts';
import type { BenchOp } from './options.ts';

export const BENCH_DB = 'bench';
export const FIND_COLLECTION = 'items';
export const INSERT_COLLECTION = 'writes';
/** Documents seeded into `bench.items` before a `find` run; find filters pick `_id` in 0..SEED_DOCS-1. */
export const SEED_DOCS = 1000;
/** Distinct pre-encoded requests per connection, cycled in order, so finds touch different ids. */
export const FRAMES_PER_CONNECTION = 16;

function msg(doc: Document): Buffer {
  const bytes = serialize(doc);
  return encodeOpMsg(0, 0, 0, bytes);
}

/** `hello` with `$db: admin` — the OP_MSG handshake current drivers use (no legacy OP_QUERY). */
export function helloFrame(): Buffer {
  return msg({ hello: 1, helloOk: true, client: { application: { name: 'proxy bench' }, driver: { name: 'pipeline-proxy-bench', version: '0' } },
    $db: 'admin' });
}

export function dropFrame(collection: string): Buffer {
  return msg({ drop: collection, $db: BENCH_DB });
}

/** One `insert` of the whole seed set: small documents `{_id: n, name, qty}`. */
export function seedFrame(): Buffer {
  const documents: Document[] = [];
  for (let i = 0; i < SEED_DOCS; i++) documents.push({ _id: i, name: `item-${i}`, qty: i % 97 });
  return msg({ insert: FIND_COLLECTION, documents, ordered: true, $db: BENCH_DB });
}

/** The request ring for one connection; `index` spreads connections over different ids. */
export function opFrames(op: BenchOp, index: number): Buffer[] {
  const frames: Buffer[] = [];
  for (let k = 0; k < FRAMES_PER_CONNECTION; k++) {
    const n = (index * FRAMES_PER_CONNECTION + k * 61) % SEED_DOCS;
    if (op === 'find') frames.push(msg({ find: FIND_COLLECTION, filter: { _id: n }, limit: 1, singleBatch: true, $db: BENCH_DB }));
    // No _id: the server assigns one, so re-sending the same bytes never hits a duplicate key.
    else if (op === 'insert') frames.push(msg({ insert: INSERT_COLLECTION, documents: [{ c: index, n, pad: 'xxxxxxxxxxxxxxxx' }], $db: BENCH_DB }));
    else frames.push(msg({ ping: 1, $db: 'admin' }));
  }
  return frames;
}
