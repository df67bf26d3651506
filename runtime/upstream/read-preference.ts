// A client's `$readPreference` (mode, tag sets, maxStalenessSeconds), read off the command without
// decoding it, and the replica-set server selection it drives, as the Server Selection
// specification describes it:
// https://github.com/mongodb/specifications/blob/master/source/server-selection/server-selection.md
// The common case — a document with `mode` only — is matched byte by byte and mapped to a shared
// constant, so a request costs no allocation here; one with tags or maxStalenessSeconds decodes
// just the `$readPreference` sub-document, once per distinct document (a small bounded cache).
import { deserialize, type Document } from 'bson';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import { BSON_DOCUMENT, BSON_STRING, ElementCursor, utf8 } from '../wire/index.ts';

export type ReadPreferenceMode = 'primary' | 'primaryPreferred' | 'secondary' | 'secondaryPreferred' | 'nearest';

export interface ReadPreference {
  readonly mode: ReadPreferenceMode;
  /** Tag sets in order of preference; empty: any server. `{}` matches every server. */
  readonly tags: readonly Readonly<Record<string, string>>[];
  /** -1: no limit. */
  readonly maxStalenessSeconds: number;
}

const MODES: readonly ReadPreferenceMode[] = ['primary', 'primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest'];
const MODE_BYTES = MODES.map((m) => utf8(m));
const PLAIN: readonly ReadPreference[] = MODES.map((mode) => Object.freeze({ mode, tags: [], maxStalenessSeconds: -1 }));

/** A request without `$readPreference` reads from (and writes to) the primary. */
export const PRIMARY: ReadPreference = PLAIN[0];

const K_MODE = utf8('mode');

/** The Server Selection spec's smallestMaxStalenessSeconds. */
const SMALLEST_MAX_STALENESS_S = 90;
/** The spec's idleWritePeriodMS: how often an idle primary writes a no-op (so lastWriteDate moves). */
const IDLE_WRITE_PERIOD_MS = 10_000;

/** Distinct read-preference documents with tags or staleness kept parsed. */
const MAX_PARSED = 256;

/** One instance per topology; reused for every request (not re-entrant). */
export class ReadPreferenceReader {
  private readonly cur = new ElementCursor();
  private readonly heartbeatMs: number;
  /** Read preferences with more than a mode, by their bytes (at most MAX_PARSED, then started afresh). */
  private readonly parsed = new Map<string, ReadPreference | ProxyError>();

  constructor(heartbeatMs: number) {
    this.heartbeatMs = heartbeatMs;
  }

  /**
   * The read preference whose element (type byte) is at `at` in `body`; `at` < 0: primary.
   * Returns a ProxyError for a malformed or invalid one (the client gets it as an error document).
   */
  read(body: Buffer, at: number): ReadPreference | ProxyError {
    if (at < 0) return PRIMARY;
    // type byte, "$readPreference\0" (16 bytes), then the embedded document.
    const start = at + 17;
    if (body[at] !== BSON_DOCUMENT) return PRIMARY;
    const cur = this.cur.open(body, start);
    const end = cur.end + 1;
    let plain = -1;
    let others = false;
    while (cur.next()) {
      if (cur.nameIs(K_MODE) && cur.type === BSON_STRING) plain = modeIndex(body, cur.valueStart + 4, cur.valueEnd - 1);
      else others = true;
    }
    if (!others && plain >= 0) return PLAIN[plain];
    // Tags or staleness: parsed once per distinct document (clients repeat the same few).
    const key = body.toString('latin1', start, end);
    let rp = this.parsed.get(key);
    if (rp === undefined) {
      rp = this.parse(deserialize(body.subarray(start, end)));
      if (this.parsed.size >= MAX_PARSED) this.parsed.clear();
      this.parsed.set(key, rp);
    }
    return rp;
  }

  /** The slow path: a read preference with more than a mode. */
  parse(doc: Document): ReadPreference | ProxyError {
    const mode = doc.mode;
    if (typeof mode !== 'string' || !(MODES as readonly string[]).includes(mode)) {
      return new ProxyError(ErrorCodes.FailedToParse, `$readPreference mode ${JSON.stringify(mode)} is not one of ${MODES.join(', ')}`);
    }
    let tags: Record<string, string>[] = [];
    if (doc.tags !== undefined) {
      if (!Array.isArray(doc.tags) || doc.tags.some((t) => t === null || typeof t !== 'object' || Array.isArray(t))) {
        return new ProxyError(ErrorCodes.FailedToParse, '$readPreference tags must be an array of documents (tag sets)');
      }
      tags = (doc.tags as Document[]).map((t) => Object.fromEntries(Object.entries(t).map(([k, v]) => [k, String(v)])));
    }
    let maxStalenessSeconds = -1;
    if (doc.maxStalenessSeconds !== undefined) {
      const n = Number(doc.maxStalenessSeconds);
      if (!Number.isFinite(n)) return new ProxyError(ErrorCodes.FailedToParse, '$readPreference maxStalenessSeconds must be a number');
      if (n > 0) {
        const least = Math.max(SMALLEST_MAX_STALENESS_S, (this.heartbeatMs + IDLE_WRITE_PERIOD_MS) / 1000);
        if (n < least) {
          return new ProxyError(ErrorCodes.BadValue,
            `$readPreference maxStalenessSeconds ${n} is below the least allowed (${least} s: 90, and upstream.heartbeat_ms + 10 s)`);
        }
        maxStalenessSeconds = n;
      }
    }
    const nonEmptyTags = tags.length > 0 && !(tags.length === 1 && Object.keys(tags[0]).length === 0);
    if (mode === 'primary' && (nonEmptyTags || maxStalenessSeconds > 0)) {
      return new ProxyError(ErrorCodes.BadValue, '$readPreference mode primary cannot be combined with tags or maxStalenessSeconds');
    }
    return { mode: mode as ReadPreferenceMode, tags, maxStalenessSeconds };
  }
}

function modeIndex(buf: Buffer, start: number, end: number): number {
  outer: for (let i = 0; i < MODE_BYTES.length; i++) {
    const m = MODE_BYTES[i];
    if (m.length !== end - start) continue;
    for (let j = 0; j < m.length; j++) if (buf[start + j] !== m[j]) continue outer;
    return i;
  }
  return -1;
}

export function describeReadPreference(rp: ReadPreference): string {
  let s = rp.mode;
  if (rp.tags.length > 0) s += ` tags ${JSON.stringify(rp.tags)}`;
  if (rp.maxStalenessSeconds > 0) s += ` maxStalenessSeconds ${rp.maxStalenessSeconds}`;
  return s;
}

/** What selection needs to know of a server (topology.ts's ServerDescription). */
export interface SelectableServer {
  readonly isPrimary: boolean;
  readonly isSecondary: boolean;
  readonly rttMs: number;
  readonly tags: Readonly<Record<string, string>>;
  /** The server's last write (ms since the epoch, its clock), 0 when unknown. */
  readonly lastWriteDate: number;
  /** When the monitor last heard from it (Date.now() ms, the proxy's clock). */
  readonly lastUpdateTime: number;
}

/**
 * Replica-set server selection (Server Selection spec, "ReplicaSetWithPrimary/NoPrimary"):
 * `servers` are the usable members, `primary` the known primary or null. `scratch` is reused
 * between calls. Returns the index in `servers` of the chosen one, or -1.
 */
export class ReplicaSetSelector<S extends SelectableServer> {
  private readonly scratch: S[] = [];
  private readonly window: S[] = [];
  private turn = 0;
  private readonly heartbeatMs: number;
  private readonly localThresholdMs: number;

  constructor(heartbeatMs: number, localThresholdMs: number) {
    this.heartbeatMs = heartbeatMs;
    this.localThresholdMs = localThresholdMs;
  }

  select(rp: ReadPreference, servers: readonly S[], primary: S | null): S | null {
    switch (rp.mode) {
      case 'primary': return primary;
      case 'primaryPreferred': return primary ?? this.pick(rp, servers, primary, false);
      case 'secondary': return this.pick(rp, servers, primary, false);
      case 'secondaryPreferred': return this.pick(rp, servers, primary, false) ?? primary;
      case 'nearest': return this.pick(rp, servers, primary, true);
    }
  }

  /** Eligible servers, by staleness, then the first tag set that matches any, then the latency window. */
  private pick(rp: ReadPreference, servers: readonly S[], primary: S | null, withPrimary: boolean): S | null {
    const c = this.scratch;
    c.length = 0;
    let maxWrite = 0;
    if (primary === null && rp.maxStalenessSeconds > 0) {
      for (const s of servers) if (s.isSecondary && s.lastWriteDate > maxWrite) maxWrite = s.lastWriteDate;
    }
    for (const s of servers) {
      if (!(s.isSecondary || (withPrimary && s.isPrimary))) continue;
      if (rp.maxStalenessSeconds > 0 && s.isSecondary && this.stalenessMs(s, primary, maxWrite) > rp.maxStalenessSeconds * 1000) continue;
      c.push(s);
    }
    if (c.length === 0) return null;
    if (rp.tags.length > 0) {
      let matched = false;
      for (const set of rp.tags) {
        let n = 0;
        for (const s of c) if (tagsMatch(s.tags, set)) c[n++] = s;
        if (n > 0) {
          c.length = n;
          matched = true;
          break;
        }
      }
      if (!matched) return null;
    }
    return this.nearest(c);
  }

  /** Round robin among those within localThresholdMs of the fastest. */
  nearest(c: readonly S[]): S | null {
    if (c.length === 0) return null;
    let min = Infinity;
    for (const s of c) if (s.rttMs < min) min = s.rttMs;
    const w = this.window;
    w.length = 0;
    for (const s of c) if (s.rttMs <= min + this.localThresholdMs) w.push(s);
    this.turn = (this.turn + 1) % 0x40000000;
    return w[this.turn % w.length];
  }

  /** The spec's staleness estimate, in ms. */
  private stalenessMs(s: S, primary: S | null, maxWrite: number): number {
    if (primary !== null) {
      return (s.lastUpdateTime - s.lastWriteDate) - (primary.lastUpdateTime - primary.lastWriteDate) + this.heartbeatMs;
    }
    return maxWrite - s.lastWriteDate + this.heartbeatMs;
  }
}

function tagsMatch(have: Readonly<Record<string, string>>, want: Readonly<Record<string, string>>): boolean {
  for (const k in want) if (have[k] !== want[k]) return false;
  return true;
}
