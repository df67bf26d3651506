// One live instance of a component step and the `proxy:step/host` functions it imports, with the
// same semantics as PluginInstance's core-ABI imports (plugin-instance.ts): the host functions
// act on the HostExchange of the call in progress; jco lifts and lowers the values (strings,
// list<u8> copies, enums as their WIT names, options as value | undefined, u64 as bigint).
import { LOG_LEVEL_NAMES, MetricKind } from './abi.ts';
import { PluginConfigRefusedError, PluginTrap } from './errors.ts';
import {
  type HostExchange, VERDICT_REJECT, VERDICT_LOCAL_REPLY, findInBody, requestCallSize, requestCallFlags, responseCallSize, responseCallFlags,
} from './host-exchange.ts';
import { StepHostState } from './step-host-state.ts';
import type { PluginServices } from './plugin-instance.ts';
import type { CompiledComponent, ComponentHostImports, ComponentStepExports } from './component-compile.ts';

type PhaseName = 'request' | 'response';
type LogLevelName = (typeof LOG_LEVEL_NAMES)[number];

const METRIC_KINDS: Record<string, MetricKind> = { counter: MetricKind.Counter, gauge: MetricKind.Gauge, histogram: MetricKind.Histogram };

export class ComponentInstance {
  readonly component: CompiledComponent;
  readonly services: PluginServices;
  /** The `proxy:step/host` functions this instance is given (jco's camelCase names). */
  readonly hostImports: ComponentHostImports;
  private readonly step: ComponentStepExports;
  /** Refills the fuel of the instance's metered core modules (before each step call). */
  private readonly refuel: () => void;
  private ex: HostExchange | null;
  private readonly state: StepHostState;
  /** Components are called in every phase they are listed in. */
  readonly phases = 3;

  /** Instantiates synchronously from the compiled core modules; throws on a trap. */
  constructor(component: CompiledComponent, services: PluginServices) {
    this.component = component;
    this.services = services;
    this.ex = null;
    this.state = new StepHostState(services);
    this.hostImports = this.imports();
    const inst = component.instantiate(this.hostImports);
    this.step = inst.step;
    this.refuel = inst.refuel;
  }

  /** Hands the config JSON to configure(); throws PluginConfigRefusedError when refused or trapped. */
  configure(): void {
    let ok: boolean;
    try {
      this.refuel();
      ok = this.step.configure(this.component.configJson);
    } catch (err) {
      throw new PluginConfigRefusedError(this.services.step, `configure trapped: ${err instanceof Error ? err.message : String(err)}`, err);
    }
    if (ok !== true) throw new PluginConfigRefusedError(this.services.step, 'configure returned false');
  }

  /** Request-phase callback (same size/flags convention as the core ABI); throws on a trap. */
  callRequest(ex: HostExchange): number {
    const size = requestCallSize(ex);
    const flags = requestCallFlags(ex);
    this.ex = ex;
    try {
      this.refuel();
      return this.step.onRequest(size, flags);
    } finally {
      this.ex = null;
    }
  }

  /** Response-phase callback over newReply ?? replyBody ?? localReply. */
  callResponse(ex: HostExchange): number {
    const size = responseCallSize(ex);
    const flags = responseCallFlags(ex);
    this.ex = ex;
    try {
      this.refuel();
      return this.step.onResponse(size, flags);
    } finally {
      this.ex = null;
    }
  }

  private current(): HostExchange {
    const ex = this.ex;
    if (ex === null) throw new PluginTrap(`plugin ${this.services.step} called a request function outside a request`);
    return ex;
  }

  private property(name: string): string | undefined {
    // The clock needs no exchange, so components may read it while configuring too.
    if (name === 'wall-clock-ms') return String(Date.now());
    const ex = this.current();
    switch (name) {
      case 'op': return ex.op;
      case 'db': return ex.db;
      case 'collection': return ex.collection;
      case 'app-name': return ex.conn.appName;
      case 'client-address': return ex.conn.clientAddress;
      case 'user': return ex.conn.user;
      case 'pipeline-id': return ex.pipelineId;
      case 'phase': return ex.phase === 0 ? 'request' : 'response';
      case 'request-id': return String(ex.requestId);
      case 'connection-id': return String(ex.conn.id);
      case 'route': return ex.route ?? '';
      case 'elapsed-ns': return String(Math.round((performance.now() - ex.startedAt) * 1e6));
      case 'reply-ok': return String(ex.phase === 1 ? ex.replyOk() : -1);
      case 'reply-code': return String(ex.phase === 1 ? ex.replyCode() : 0);
      default: return undefined;
    }
  }

  private imports(): ComponentHostImports {
    const services = this.services;
    const step = services.step;
    const state = this.state;
    const fns = {
      getBody: (which: PhaseName): Uint8Array | undefined => {
        const ex = this.current();
        const body = which === 'request' ? ex.requestDocument() : (ex.newReply ?? ex.replyBody ?? ex.localReply);
        return body ?? undefined;
      },
      setBody: (which: PhaseName, bson: Uint8Array): void => {
        const ex = this.current();
        if (which === 'request') ex.newRequest = bson;
        else ex.newReply = bson;
      },
      reject: (code: number, codeName: string, message: string): void => {
        const ex = this.current();
        ex.verdict = VERDICT_REJECT;
        ex.rejectCode = code;
        ex.rejectCodeName = codeName;
        ex.rejectMessage = message;
      },
      replyLocal: (bson: Uint8Array): void => {
        const ex = this.current();
        if (ex.phase === 0) {
          ex.verdict = VERDICT_LOCAL_REPLY;
          ex.localReply = bson;
        } else {
          ex.newReply = bson;
        }
      },
      setRoute: (uri: string): void => {
        this.current().route = uri;
      },
      setUser: (name: string): void => {
        this.current().conn.user = name;
      },
      log: (level: LogLevelName, message: string): void => {
        const name = LOG_LEVEL_NAMES.includes(level) ? level : 'info';
        const ex = this.ex;
        services.logger[name]({ step, pipeline: services.pipelineId, op: ex === null ? undefined : ex.op }, message);
      },
      logFields: (level: LogLevelName, members: string): void => {
        const i = LOG_LEVEL_NAMES.indexOf(level);
        state.logRecord(i < 0 ? 2 : i, Buffer.from(members, 'utf8'));
      },
      bodyFind: (which: PhaseName, bytes: Uint8Array): number => findInBody(this.current(), which === 'request' ? 0 : 1, bytes),
      getProperty: (name: string): string | undefined => this.property(name),
      defineMetric: (kind: string, name: string): number | undefined => {
        const k = METRIC_KINDS[kind];
        const id = k === undefined ? -1 : state.defineMetric(k, name);
        return id < 0 ? undefined : id;
      },
      incrementMetric: (id: number, delta: number): void => state.increment(id, delta),
      recordMetric: (id: number, value: number): void => state.record(id, value),
      subopBegin: state.timesSubops ? (name: string): void => state.subopBegin(name) : noop1,
      subopEnd: state.timesSubops ? (): void => state.subopEnd(this.ex === null ? 0 : this.ex.phase) : noop,
      kvGet: (key: string): Uint8Array | undefined => services.kv.get(key),
      kvSet: (key: string, value: Uint8Array, ttlMs: number): boolean => services.kv.set(key, value, ttlMs),
      kvDelete: (key: string): boolean => services.kv.delete(key),
      nowNs: (): bigint => process.hrtime.bigint(),
    };
    return fns as unknown as ComponentHostImports;
  }
}

function noop(): void {}
function noop1(_a: string): void {}
