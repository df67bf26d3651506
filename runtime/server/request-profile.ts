// The per-request profile (SPEC §2.7) a client asks for with `proxy_profile=true` in its appName:
// `proxy_profile: { total_us, upstream_us, steps: [{ name, phase, us }] }`, appended as a top-level
// field of each reply document of a pipeline request. Only that client's replies are touched (and
// re-encoded); every other client's replies stay byte-identical to the upstream's.
import { serialize, type Document } from 'bson';
import type { RequestTimings } from '../pipeline/index.ts';
import { phaseName } from '../wasm/index.ts';

export function profileDocument(totalNs: number, upstreamNs: number, t: RequestTimings): Document {
  const steps: Document[] = [];
  for (let i = 0; i < t.count; i++) {
    steps.push({ name: t.timers[i].step, phase: phaseName(t.timers[i].phase), us: Math.round(t.ns[i] / 1000) });
  }
  return { total_us: Math.round(totalNs / 1000), upstream_us: Math.round(upstreamNs / 1000), steps };
}

/** `body` (a BSON document) with `proxy_profile: profile` added as its last field. */
export function appendProfile(body: Uint8Array, profile: Document): Buffer {
  const extra = serialize({ proxy_profile: profile });
  // Both are documents: [int32 length][elements][0x00]. Join the element lists.
  const elements = extra.length - 5;
  const out = Buffer.allocUnsafe(body.length + elements);
  out.set(body.subarray(0, body.length - 1), 0);
  out.set(extra.subarray(4, extra.length - 1), body.length - 1);
  out[out.length - 1] = 0;
  out.writeInt32LE(out.length, 0);
  return out;
}
