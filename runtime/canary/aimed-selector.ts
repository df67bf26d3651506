// An aimed canary's split (docs/canary.md, "Aimed canaries"): requests from the chosen clients (a
// ClientMatch on appName, user, address) always go to the candidate; every other request goes to it
// by the stage's percentage, drawn per request, or once per client connection or per session
// (`sticky`) so one client does not flip between the versions.
//
// Stickiness keeps the *draw*, not the arm: a connection or session has one number u in [0, 100)
// and is on the candidate while u < traffic_pct. As the stages raise the traffic a client only ever
// moves from the baseline to the candidate, never back (a PATCH that lowers the traffic moves the
// ones above it back). A session's u is a hash of its `lsid` with a per-canary salt, so it needs no
// table: nothing to bound or expire, the same answer on every connection the session uses, and after
// a restart. A connection's u is drawn at its first request and kept with the connection's facts.
import type { ConnectionInfo, GraphSelector, Pipeline } from '../pipeline/index.ts';
import { ClientMatch } from '../pipeline/client-match.ts';
import { BSON_DOCUMENT } from '../wire/bson-peek.ts';

export type Sticky = 'connection' | 'session';

/** What one connection was found to be, kept while the connection lives (a WeakMap entry). */
class ConnFacts {
  user: string;
  appName: string;
  matched: boolean;
  draw: number;
  constructor(user: string, appName: string, matched: boolean, draw: number) {
    this.user = user;
    this.appName = appName;
    this.matched = matched;
    this.draw = draw;
  }
}

/** FNV-1a over the lsid document's bytes, seeded with the salt; mapped to [0, 100). */
export function sessionDraw(body: Uint8Array, lsidAt: number, salt: number): number {
  // type byte, "lsid\0", then the embedded document.
  if (body[lsidAt] !== BSON_DOCUMENT) return -1;
  const start = lsidAt + 6;
  if (start + 4 > body.length) return -1;
  const len = body[start] | (body[start + 1] << 8) | (body[start + 2] << 16) | (body[start + 3] << 24);
  const end = start + len;
  if (len < 5 || end > body.length) return -1;
  let h = (0x811c9dc5 ^ salt) >>> 0;
  for (let i = start; i < end; i++) h = Math.imul(h ^ body[i], 0x01000193) >>> 0;
  // A final avalanche, so bytes late in the document (the UUID's) reach the high bits evenly.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  return (h >>> 0) / 0x1_0000_0000 * 100;
}

/** A 32-bit salt from a canary id, so two canaries split the same sessions independently. */
export function saltOf(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export class AimedSelector implements GraphSelector {
  trafficPct: number;
  private readonly match: ClientMatch | null;
  private readonly sticky: Sticky | null;
  private readonly salt: number;
  private readonly random: () => number;
  private readonly conns = new WeakMap<ConnectionInfo, ConnFacts>();

  constructor(trafficPct: number, match: ClientMatch | null, sticky: Sticky | null, salt: number, random: () => number = Math.random) {
    this.trafficPct = trafficPct;
    this.match = match;
    this.sticky = sticky;
    this.salt = salt;
    this.random = random;
  }

  select(baseline: Pipeline, candidate: Pipeline, conn: ConnectionInfo, body: Uint8Array, lsidAt: number): Pipeline {
    let f = this.conns.get(conn);
    // Matched once per connection; again only when its login or appName changed.
    if (f === undefined) {
      f = new ConnFacts(conn.user, conn.appName, this.match !== null && this.match.matches(conn), this.sticky === 'connection' ? this.random() * 100 : 0);
      this.conns.set(conn, f);
    } else if (f.user !== conn.user || f.appName !== conn.appName) {
      f.user = conn.user;
      f.appName = conn.appName;
      f.matched = this.match !== null && this.match.matches(conn);
    }
    if (f.matched) return candidate;
    let u: number;
    if (this.sticky === 'connection') u = f.draw;
    else if (this.sticky === 'session' && lsidAt >= 0) {
      u = sessionDraw(body, lsidAt, this.salt);
      if (u < 0) u = this.random() * 100;
    } else u = this.random() * 100;
    return u < this.trafficPct ? candidate : baseline;
  }
}
