// Which pipeline a request goes through (config `pipelines`): the first whose match it satisfies,
// else the default. Built once per configuration; the request path pays as little as can be:
//   - one pipeline: `single` is its slot, and a connection never asks anything again;
//   - several: what is fixed for a connection (app_name, user, client address) is decided once per
//     connection (and again after a login, a logout or a reload) into a ConnectionRoute: the
//     pipelines it can still reach, cut after the first one that needs nothing of the request.
//     When that is the first, the route is `fixed` and the connection holds the slot itself.
//     Otherwise each request is one memo lookup over the request keys the candidates test
//     (command, db, collection, read from the CommandPeek the connection already has); a miss
//     tests the candidates in order and remembers the answer (bounded per route, MEMO_LIMIT, and
//     across the routing's routes, MEMO_BUDGET).
import {
  COMMAND_ALIASES, compileCidrs, compileGlob, parseCidr, valuesOf,
  type Cidr, type MatchSpec, type StringTest,
} from '../config/index.ts';
import type { GraphSlot } from './graph-slot.ts';

/** One pipeline to route to: its id, its match (empty: every request) and its graphs. */
export interface RouteEntry {
  readonly id: string;
  readonly match: MatchSpec;
  readonly slot: GraphSlot;
}

/** Answers remembered per ConnectionRoute at most (a client naming ever new collections then costs a scan). */
export const MEMO_LIMIT = 4096;
/** ConnectionRoutes kept per routing (connections with the same candidates share one and its memo). */
const ROUTE_CACHE_LIMIT = 1024;
/**
 * Answers remembered across all routes of one routing: clients choosing their appName can make
 * many candidate sets, and each set's memo must not add up to more than this (then they scan).
 */
export const MEMO_BUDGET = 65536;

/** What is left of a routing's MEMO_BUDGET, shared by its routes. */
interface MemoBudget { left: number }

/** Any of `values` matched by its compiled test (one test when there is one value). */
function anyOf(tests: StringTest[]): StringTest {
  return tests.length === 1 ? tests[0] : (s) => {
    for (let i = 0; i < tests.length; i++) if (tests[i](s)) return true;
    return false;
  };
}

class CompiledPipeline {
  readonly index: number;
  readonly id: string;
  readonly slot: GraphSlot;
  readonly appName: StringTest | null;
  readonly user: ReadonlySet<string> | null;
  readonly client: StringTest | null;
  readonly command: ReadonlySet<string> | null;
  readonly db: StringTest | null;
  readonly collection: StringTest | null;
  /** Whether it tests anything of the request itself (else a connection that reaches it always takes it). */
  readonly perRequest: boolean;

  constructor(index: number, e: RouteEntry) {
    this.index = index;
    this.id = e.id;
    this.slot = e.slot;
    const m = e.match;
    const globs = (k: 'db' | 'collection' | 'app_name') => (valuesOf(m[k]).length === 0 ? null : anyOf(valuesOf(m[k]).map(compileGlob)));
    const names = (k: 'command' | 'user') => (valuesOf(m[k]).length === 0 ? null : new Set(valuesOf(m[k])));
    // A command mongod runs under two spellings is matched by either (the upstream runs the same command).
    const withAliases = (set: Set<string> | null) => {
      if (set !== null) for (const c of [...set]) if (COMMAND_ALIASES.has(c)) set.add(COMMAND_ALIASES.get(c)!);
      return set;
    };
    this.appName = globs('app_name');
    this.user = names('user');
    const cidrs = valuesOf(m.client).map(parseCidr).filter((c): c is Cidr => typeof c !== 'string');
    this.client = valuesOf(m.client).length === 0 ? null : compileCidrs(cidrs);
    this.command = withAliases(names('command'));
    this.db = globs('db');
    this.collection = globs('collection');
    this.perRequest = this.command !== null || this.db !== null || this.collection !== null;
  }

  reachable(appName: string, user: string, clientIp: string): boolean {
    return (this.appName === null || this.appName(appName))
      && (this.user === null || this.user.has(user))
      && (this.client === null || this.client(clientIp));
  }

  takes(op: string, db: string, collection: string): boolean {
    return (this.command === null || this.command.has(op))
      && (this.db === null || this.db(db))
      && (this.collection === null || this.collection(collection));
  }
}

type Memo = Map<string, Memo | GraphSlot>;

/** The pipelines one connection can reach, and the per-request choice among them. */
export class ConnectionRoute {
  /** The slot every request of the connection goes to, when nothing of the request matters; else null. */
  readonly fixed: GraphSlot | null;
  /** The pipelines it can reach, in matching order; the last takes every request. */
  readonly candidates: readonly CompiledPipeline[];
  private readonly byCommand: boolean;
  private readonly byDb: boolean;
  private readonly byCollection: boolean;
  private readonly memo: Memo = new Map();
  private memoSize = 0;
  private readonly budget: MemoBudget;

  constructor(candidates: CompiledPipeline[], budget: MemoBudget = { left: MEMO_LIMIT }) {
    this.candidates = candidates;
    this.budget = budget;
    this.fixed = candidates[0].perRequest ? null : candidates[0].slot;
    this.byCommand = candidates.some((c) => c.command !== null);
    this.byDb = candidates.some((c) => c.db !== null);
    this.byCollection = candidates.some((c) => c.collection !== null);
  }

  /** Ids of the candidates (tests, logs). */
  get ids(): string[] {
    return this.candidates.map((c) => c.id);
  }

  /** The slot of the first candidate this request satisfies. */
  pick(op: string, db: string, collection: string): GraphSlot {
    const fixed = this.fixed;
    if (fixed !== null) return fixed;
    // The memo's levels are the request keys some candidate tests, in the order command, db, collection.
    let m: Memo | GraphSlot | undefined = this.memo;
    if (this.byCommand) m = (m as Memo).get(op);
    if (this.byDb && m !== undefined) m = (m as Memo).get(db);
    if (this.byCollection && m !== undefined) m = (m as Memo).get(collection);
    if (m !== undefined) return m as GraphSlot;
    return this.scan(op, db, collection);
  }

  private scan(op: string, db: string, collection: string): GraphSlot {
    const cs = this.candidates;
    let slot = cs[cs.length - 1].slot;
    for (let i = 0; i < cs.length; i++) {
      if (cs[i].takes(op, db, collection)) {
        slot = cs[i].slot;
        break;
      }
    }
    if (this.memoSize < MEMO_LIMIT && this.budget.left > 0) this.remember(op, db, collection, slot);
    return slot;
  }

  private remember(op: string, db: string, collection: string, slot: GraphSlot): void {
    const keys: string[] = [];
    if (this.byCommand) keys.push(op);
    if (this.byDb) keys.push(db);
    if (this.byCollection) keys.push(collection);
    let m = this.memo;
    for (let i = 0; i < keys.length - 1; i++) {
      let next = m.get(keys[i]) as Memo | undefined;
      if (next === undefined) m.set(keys[i], next = new Map());
      m = next;
    }
    m.set(keys[keys.length - 1], slot);
    this.memoSize++;
    this.budget.left--;
  }
}

/** The routing of one configuration's pipelines. Replaced whole by a reload that changes them. */
export class PipelineRouting {
  /** With one pipeline: its slot (connections hold it and route nothing); null with several. */
  readonly single: GraphSlot | null;
  /** The default pipeline's slot (the last entry). */
  readonly defaultSlot: GraphSlot;
  private readonly pipelines: CompiledPipeline[];
  private readonly routes = new Map<string, ConnectionRoute>();
  private readonly budget: MemoBudget = { left: MEMO_BUDGET };

  /** `entries` in matching order, the default (match-all) last. */
  constructor(entries: readonly RouteEntry[]) {
    if (entries.length === 0) throw new Error('a routing needs at least the default pipeline');
    // The default takes what no other pipeline takes, whatever its entry says.
    this.pipelines = entries.map((e, i) => new CompiledPipeline(i, i === entries.length - 1 ? { ...e, match: {} } : e));
    this.defaultSlot = entries[entries.length - 1].slot;
    this.single = entries.length === 1 ? this.defaultSlot : null;
  }

  /** Every request to `slot`. */
  static single(slot: GraphSlot): PipelineRouting {
    return new PipelineRouting([{ id: slot.pipelineId, match: {}, slot }]);
  }

  /** Ids in matching order. */
  get ids(): string[] {
    return this.pipelines.map((p) => p.id);
  }

  /**
   * The route of a connection with this identity: `clientIp` is the socket's remote address (an
   * IPv4-mapped IPv6 address is tested as IPv4). Connections with the same candidates share one.
   */
  forConnection(appName: string, user: string, clientIp: string): ConnectionRoute {
    const candidates: CompiledPipeline[] = [];
    for (const p of this.pipelines) {
      if (!p.reachable(appName, user, clientIp)) continue;
      candidates.push(p);
      if (!p.perRequest) break;
    }
    if (candidates.length === 0 || candidates[candidates.length - 1].perRequest) candidates.push(this.pipelines[this.pipelines.length - 1]);
    let key = '';
    for (const c of candidates) key += `${c.index},`;
    let route = this.routes.get(key);
    if (route === undefined) {
      route = new ConnectionRoute(candidates, this.budget);
      if (this.routes.size < ROUTE_CACHE_LIMIT) this.routes.set(key, route);
    }
    return route;
  }
}
