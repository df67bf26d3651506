// The profiler's cumulative statistics as plain JSON — what the snapshot store writes to
// `state.json` and reads back after a restart (docs/profiling.md, "Snapshots and persistence").
//
// A distribution keeps its exact counters (count, errors, sum, max), its fixed Prometheus bucket
// counts with the bounds they were counted against, and its HDR histogram encoded the way
// HdrHistogram tools read it (compressed base64), so percentiles after a restore are exactly the
// ones before. Decoding validates the whole file and decodes every histogram before anything is
// merged: a bad file changes nothing.
import { deflateSync } from 'node:zlib';
import * as hdr from 'hdr-histogram-js';
import * as v from 'valibot';
import { VARIANTS } from '../pipeline/index.ts';
import type { Distribution } from './latency-stats.ts';
import { MappedLatencyStats } from './mmap-store.ts';

export const STATE_FORMAT = 'proxy-profiling-state';
export const STATE_VERSION = 1;

const count = v.pipe(v.number(), v.integer(), v.minValue(0));

const distSchema = v.object({
  count, errors: count, sum_ns: v.pipe(v.number(), v.minValue(0)), max_ns: v.pipe(v.number(), v.minValue(0)),
  le: v.array(v.number()), buckets: v.array(v.pipe(v.number(), v.minValue(0))), hdr: v.string(),
});

const stateSchema = v.object({
  format: v.literal(STATE_FORMAT),
  version: v.literal(STATE_VERSION),
  written: v.string(),
  since: v.string(),
  graphs: v.array(v.object({
    pipeline_id: v.string(),
    pipeline: v.picklist(VARIANTS),
    ok: count, errors: count,
    total: distSchema, upstream: distSchema, overhead: distSchema, acquire: distSchema,
    steps: v.array(v.object({
      name: v.string(),
      phase: v.picklist(['request', 'response']),
      slow: count,
      /** Slow-step log lines the rate limit held back (absent in states written before it existed). */
      slow_log_suppressed: v.optional(count, 0),
      latency: distSchema,
      subops: v.array(v.object({ name: v.string(), dist: distSchema })),
    })),
  })),
});

export type DistState = v.InferOutput<typeof distSchema>;
export type ProfilerState = v.InferOutput<typeof stateSchema>;

/** A distribution read back: its counters and its decoded histogram (destroy it once merged). */
export interface DecodedDist {
  state: DistState;
  hdr: hdr.Histogram;
}

export class StateFormatError extends Error {
  override readonly name = 'StateFormatError';
}

/** HdrHistogram's V2 compressed encoding cookie (the low nibble's 0x10 marks the word size). */
const V2_COMPRESSED_COOKIE = 0x1c849304 | 0x10;

/**
 * What hdr-histogram-js's encodeIntoCompressedBase64 returns, byte for byte (cookie, length, zlib
 * deflate of the histogram's V2 encoding), with Node's native zlib instead of the library's
 * JavaScript deflate: about 0.5 ms instead of 1.7 ms per histogram, on the event loop.
 */
export function encodeCompressedBase64(h: hdr.Histogram): string {
  const z = deflateSync((h as hdr.WasmHistogram).encode());
  const out = Buffer.allocUnsafe(8 + z.length);
  out.writeInt32BE(V2_COMPRESSED_COOKIE, 0);
  out.writeInt32BE(z.length, 4);
  z.copy(out, 8);
  return out.toString('base64');
}

/**
 * Encoding a histogram deflates it (a fraction of a millisecond each); between two snapshots most
 * distributions of a quiet graph do not change, so the last encoding is kept per distribution and
 * reused while its count and sum are the same. Cleared on reset.
 */
export class EncodedCache {
  private byStats = new WeakMap<Distribution, { count: number; sumNs: number; b64: string }>();

  encode(s: Distribution): string {
    const hit = this.byStats.get(s);
    if (hit !== undefined && hit.count === s.count && hit.sumNs === s.sumNs) return hit.b64;
    const b64 = encodeCompressedBase64(s.hdr);
    this.byStats.set(s, { count: s.count, sumNs: s.sumNs, b64 });
    return b64;
  }

  clear(): void {
    this.byStats = new WeakMap();
  }
}

export function encodeDist(s: Distribution, cache: EncodedCache): DistState {
  return {
    count: s.count, errors: s.errors, sum_ns: s.sumNs, max_ns: s.maxNs,
    le: [...s.bounds], buckets: Array.from(s.counts), hdr: cache.encode(s),
  };
}

/** Validates a parsed `state.json`; throws StateFormatError with the first problem. */
/**
 * The version of a state written by a newer proxy (its format, a higher version), else null. Such a
 * file is not corrupt: this proxy cannot read it, and must not destroy it (a rollback after an upgrade).
 */
export function newerStateVersion(json: unknown): number | null {
  if (typeof json !== 'object' || json === null) return null;
  const { format, version } = json as { format?: unknown; version?: unknown };
  return format === STATE_FORMAT && typeof version === 'number' && Number.isInteger(version) && version > STATE_VERSION ? version : null;
}

export function parseState(json: unknown): ProfilerState {
  const r = v.safeParse(stateSchema, json);
  if (!r.success) {
    const issue = r.issues[0];
    const path = issue.path?.map((p) => String(p.key)).join('.') ?? '';
    throw new StateFormatError(`${path === '' ? 'state' : path}: ${issue.message}`);
  }
  return r.output;
}

/**
 * Decodes the histograms of `dists`, in order. On the first failure the ones already decoded are
 * destroyed and a StateFormatError is thrown.
 */
export function decodeAll(dists: readonly DistState[]): hdr.Histogram[] {
  const out: hdr.Histogram[] = [];
  try {
    for (const d of dists) {
      const h = hdr.decodeFromCompressedBase64(d.hdr, 32, true);
      if (h.totalCount !== d.count) throw new StateFormatError(`histogram holds ${h.totalCount} values, its count says ${d.count}`);
      out.push(h);
    }
  } catch (err) {
    for (const h of out) h.destroy();
    throw err instanceof StateFormatError ? err : new StateFormatError(`undecodable histogram: ${(err as Error).message}`);
  }
  return out;
}

/**
 * Adds a restored distribution into a live one: counters add, max is the larger, the histogram is
 * merged. Bucket counts add when the bounds are the ones `s` counts against; after a change of
 * `histogram_buckets` they are re-derived from the HDR histogram (to its 3-digit precision).
 */
export function mergeDist(s: Distribution, d: DistState, h: hdr.Histogram): void {
  s.count += d.count;
  s.errors += d.errors;
  s.sumNs += d.sum_ns;
  if (d.max_ns > s.maxNs) s.maxNs = d.max_ns;
  if (s instanceof MappedLatencyStats) s.addEncoded(d.hdr);
  else s.hdr.add(h as typeof s.hdr);
  const sameBounds = d.le.length === s.bounds.length && d.le.every((x, i) => x === s.bounds[i]) && d.buckets.length === s.counts.length;
  if (sameBounds) {
    for (let i = 0; i < d.buckets.length; i++) s.counts[i] += d.buckets[i];
    return;
  }
  const js = hdr.decodeFromCompressedBase64(d.hdr, 32, false) as unknown as hdr.JsHistogram;
  for (let i = 0; i < js.countsArrayLength; i++) {
    const n = js.getCountAtIndex(i);
    if (n === 0) continue;
    const us = js.valueFromIndex(i);
    let b = 0;
    while (b < s.bounds.length && us > s.bounds[b]) b++;
    s.counts[b] += n;
  }
}
