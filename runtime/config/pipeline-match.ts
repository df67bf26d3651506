// What a pipeline's `match` accepts, compiled once: globs (db, collection, app_name), exact names
// (command, user) and CIDR blocks (client). Pure functions with no I/O, shared by the schema (which
// refuses a bad pattern and finds a shadowed pipeline) and the request path (runtime/pipeline/
// routing.ts), so a value means the same thing in both.
import { isIP } from 'node:net';

/** The match keys, in the order the docs list them. These names are the configuration contract. */
export const MATCH_KEYS = ['db', 'collection', 'command', 'app_name', 'user', 'client'] as const;
export type MatchKey = typeof MATCH_KEYS[number];
/** Keys decided once per connection (who the client is); the others per request (what it asks). */
export const CONNECTION_KEYS: readonly MatchKey[] = ['app_name', 'user', 'client'];
export const REQUEST_KEYS: readonly MatchKey[] = ['db', 'collection', 'command'];
/** Keys whose values are globs (`*` any run of characters, `?` one character). */
export const GLOB_KEYS: ReadonlySet<MatchKey> = new Set(['db', 'collection', 'app_name']);

/** A match as configured: each key one value or a list (any of them); keys absent match anything. */
export type MatchSpec = { [K in MatchKey]?: string | string[] };

/** The values of one key, as a list. */
export function valuesOf(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : typeof v === 'string' ? [v] : v;
}

// ---- globs ------------------------------------------------------------------------------------

/** A compiled glob: the cheapest test that decides it (exact, prefix, suffix, any, else globMatches). */
export type StringTest = (s: string) => boolean;

export function hasWildcard(pattern: string): boolean {
  return pattern.includes('*') || pattern.includes('?');
}

/**
 * A glob as a RegExp: `*` any run of characters, `?` one character, everything else literal. Not
 * used on values from clients (it backtracks: see globMatches); the reference globMatches is tested
 * against.
 */
export function globRegExp(glob: string): RegExp {
  return new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 's');
}

/** `orders` exact, `orders_*` prefix, `*_archive` suffix, `*` anything, other forms globMatches. */
export function compileGlob(pattern: string): StringTest {
  if (pattern === '*') return () => true;
  if (!hasWildcard(pattern)) return (s) => s === pattern;
  const body = pattern.slice(0, -1);
  if (pattern.endsWith('*') && !hasWildcard(body)) return (s) => s.startsWith(body);
  const tail = pattern.slice(1);
  if (pattern.startsWith('*') && !hasWildcard(tail)) return (s) => s.endsWith(tail);
  return (s) => globMatches(pattern, s);
}

/**
 * Whether `s` matches glob `pattern`, in at most pattern × string steps: on a mismatch only the
 * last `*` takes one more character. The values matched come from clients (a collection name, a
 * database, an appName), so no backtracking RegExp: `^.*_.*_archive$` took 0.65 s on a collection
 * name of 20,000 `_` (quadratic), `*-*-*-*-*x` 2.3 s on a 128-byte appName (a power of the stars).
 */
export function globMatches(pattern: string, s: string): boolean {
  let p = 0;
  let i = 0;
  let star = -1;
  let from = 0;
  while (i < s.length) {
    const c = pattern[p];
    if (c === '*') {
      star = p++;
      from = i;
    } else if (p < pattern.length && (c === '?' || c === s[i])) {
      p++;
      i++;
    } else if (star >= 0) {
      p = star + 1;
      i = ++from;
    } else {
      return false;
    }
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

/**
 * Whether every string glob `inner` matches is matched by glob `outer` as well (sound, not
 * complete: true only when it can be shown — equal, `*`, a literal `inner` that `outer` matches,
 * or a literal prefix `p*` that `inner` literally starts with).
 */
export function globCovers(outer: string, inner: string): boolean {
  if (outer === inner || outer === '*') return true;
  if (!hasWildcard(inner)) return compileGlob(outer)(inner);
  const prefix = outer.slice(0, -1);
  return outer.endsWith('*') && !hasWildcard(prefix) && inner.slice(0, prefix.length) === prefix && !hasWildcard(inner.slice(0, prefix.length));
}

// ---- CIDR -------------------------------------------------------------------------------------

/** A parsed block: address family, the network's bits, the prefix length. */
export interface Cidr { readonly family: 4 | 6; readonly bits: bigint; readonly prefix: number }

/** `10.0.0.0/8`, `2001:db8::/32`, or an address alone (a block of one); the reason when malformed. */
export function parseCidr(text: string): Cidr | string {
  const slash = text.indexOf('/');
  const addr = slash < 0 ? text : text.slice(0, slash);
  const family = isIP(addr);
  if (family === 0) return `"${addr}" is not an IPv4 or IPv6 address`;
  const width = family === 4 ? 32 : 128;
  let prefix = width;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > width) return `prefix length "${p}" must be an integer 0..${width}`;
    prefix = Number(p);
  }
  // Host bits are ignored (10.1.2.3/8 is 10.0.0.0/8), as node:net's BlockList (aimed canaries' match) does.
  return { family: family as 4 | 6, bits: addressBits(addr, family as 4 | 6) & prefixMask(width, prefix), prefix };
}

function prefixMask(width: number, prefix: number): bigint {
  const all = (1n << BigInt(width)) - 1n;
  return prefix === 0 ? 0n : (all >> BigInt(width - prefix)) << BigInt(width - prefix);
}

function addressBits(addr: string, family: 4 | 6): bigint {
  if (family === 4) return addr.split('.').reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n);
  let text = addr.split('%')[0];
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4 !== null) {
    const n = addressBits(v4[1], 4);
    text = `${text.slice(0, -v4[1].length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, null];
  const h = head === '' ? [] : head.split(':');
  const t = tail === null || tail === '' ? [] : tail.split(':');
  const groups = tail === null ? h : [...h, ...new Array(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** Whether block `outer` contains every address of block `inner`. */
export function cidrCovers(outer: Cidr, inner: Cidr): boolean {
  if (outer.family !== inner.family || outer.prefix > inner.prefix) return false;
  const width = outer.family === 4 ? 32 : 128;
  const mask = prefixMask(width, outer.prefix);
  return (inner.bits & mask) === outer.bits;
}

/**
 * A client address test over the blocks of `cidrs`: an IPv4-mapped IPv6 address (`::ffff:10.1.2.3`,
 * what a dual-stack listener reports) is tested as its IPv4 address.
 */
export function compileCidrs(cidrs: readonly Cidr[]): StringTest {
  return (address) => {
    let a = address;
    if (a.startsWith('::ffff:') && a.includes('.')) a = a.slice(7);
    const family = isIP(a);
    if (family === 0) return false;
    const bits = addressBits(a, family as 4 | 6);
    for (const c of cidrs) {
      if (c.family !== family) continue;
      const width = family === 4 ? 32 : 128;
      if ((bits & prefixMask(width, c.prefix)) === c.bits) return true;
    }
    return false;
  };
}

// ---- command names ----------------------------------------------------------------------------

/**
 * Commands mongod runs under two names (its Command aliases), each spelling to the other: a
 * `command` match names either and matches both (the request path), and the shadowing check knows
 * them. The plugins' rule matching has the same list (plugins/_shared/match.ts, AssemblyScript).
 */
export const COMMAND_ALIASES: ReadonlyMap<string, string> = new Map([
  ['findAndModify', 'findandmodify'], ['isMaster', 'ismaster'], ['buildInfo', 'buildinfo'], ['dbStats', 'dbstats'],
  ['collStats', 'collstats'], ['mapReduce', 'mapreduce'], ['getLastError', 'getlasterror'], ['dataSize', 'datasize'],
].flatMap(([a, b]) => [[a, b], [b, a]]));

// ---- shadowing --------------------------------------------------------------------------------

/**
 * Whether every request `later` matches is matched by `earlier` too, so that a pipeline listed after
 * one with `earlier` can never be chosen. Sound, not complete: an empty `earlier` (match-all), an
 * identical match, and a match whose every key's values cover the later one's are found.
 */
export function matchCovers(earlier: MatchSpec, later: MatchSpec): boolean {
  for (const key of MATCH_KEYS) {
    const outer = valuesOf(earlier[key]);
    if (outer.length === 0) continue; // earlier does not restrict this key
    const inner = valuesOf(later[key]);
    if (inner.length === 0) return false; // later accepts values earlier does not
    for (const value of inner) {
      const covered = outer.some((o) => {
        if (key === 'client') {
          const a = parseCidr(o);
          const b = parseCidr(value);
          return typeof a !== 'string' && typeof b !== 'string' && cidrCovers(a, b);
        }
        if (GLOB_KEYS.has(key)) return globCovers(o, value);
        return o === value || (key === 'command' && COMMAND_ALIASES.get(o) === value);
      });
      if (!covered) return false;
    }
  }
  return true;
}
