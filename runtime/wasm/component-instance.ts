// One live instance of a component step, and the marshalling of the `proxy:step/host` functions it
// imports: jco lifts and lowers the values (strings, list<u8> copies, enums as their WIT names,
// options as value | undefined, u64 as bigint). What each function does is StepHost's
// (step-host.ts), shared with core modules; the WIT names map to the core ABI's ids through
// abi-spec.ts.
import { PROPERTY, LOG_LEVEL, METRIC_KIND, PHASE, type EnumSpec } from './abi-spec.ts';
import { PhaseMask, type MetricKind } from './abi.ts';
import { PluginConfigRefusedError } from './errors.ts';
import { type HostExchange, requestCallSize, requestCallFlags, responseCallSize, responseCallFlags } from './host-exchange.ts';
import { StepHost } from './step-host.ts';
import { encodeLabelKey } from './plugin-metrics.ts';
import type { PluginServices } from './plugin-instance.ts';
import type { CompiledComponent, ComponentHostImports, ComponentStepExports } from './component-compile.ts';

/** WIT case name → core ABI value, for one enum of abi-spec.ts. */
function witIds(e: EnumSpec): ReadonlyMap<string, number> {
  return new Map(Object.values(e.members).map((m) => [m.wit!, m.value]));
}
const PROPERTY_IDS = witIds(PROPERTY);
const LOG_LEVELS = witIds(LOG_LEVEL);
const METRIC_KINDS = witIds(METRIC_KIND);
const PHASES = witIds(PHASE);

export class ComponentInstance {
  readonly component: CompiledComponent;
  readonly services: PluginServices;
  /** The `proxy:step/host` functions this instance is given (jco's camelCase names). */
  readonly hostImports: ComponentHostImports;
  private readonly step: ComponentStepExports;
  /** Refills the fuel of the instance's metered core modules (before each step call). */
  private readonly refuel: () => void;
  private readonly host: StepHost;
  /** Components are called in every phase they are listed in. */
  readonly phases: PhaseMask = PhaseMask.Both;

  /** Instantiates synchronously from the compiled core modules; throws on a trap. */
  constructor(component: CompiledComponent, services: PluginServices) {
    this.component = component;
    this.services = services;
    this.host = new StepHost(services);
    this.hostImports = this.imports();
    const inst = component.instantiate(this.hostImports);
    this.step = inst.step;
    this.refuel = inst.refuel;
  }

  /** Hands the config JSON to configure(); throws PluginConfigRefusedError when refused (with the
   *  warnings and errors it logged meanwhile as the reason) or trapped. */
  configure(): void {
    const host = this.host;
    let ok: boolean;
    host.beginConfigure();
    try {
      this.refuel();
      ok = this.step.configure(this.component.configJson);
    } catch (err) {
      throw new PluginConfigRefusedError(this.services.step, `configure trapped: ${err instanceof Error ? err.message : String(err)}`, err);
    } finally {
      host.endConfigure();
    }
    if (ok !== true) throw new PluginConfigRefusedError(this.services.step, host.refusalReason('configure returned false'));
  }

  /** Request-phase callback (same size/flags convention as the core ABI); throws on a trap. */
  callRequest(ex: HostExchange): number {
    const size = requestCallSize(ex);
    const host = this.host;
    const flags = requestCallFlags(ex) | host.subopFlag();
    host.begin(ex);
    try {
      this.refuel();
      return this.step.onRequest(size, flags);
    } finally {
      host.end();
    }
  }

  /** Response-phase callback over newReply ?? replyBody ?? localReply. */
  callResponse(ex: HostExchange): number {
    const size = responseCallSize(ex);
    const host = this.host;
    const flags = responseCallFlags(ex) | host.subopFlag();
    host.begin(ex);
    try {
      this.refuel();
      return this.step.onResponse(size, flags);
    } finally {
      host.end();
    }
  }

  /** The WIT marshalling of each host function (names and types: abi-spec.ts, sdk/wit/step.wit). */
  private imports(): ComponentHostImports {
    const host = this.host;
    const phase = (which: string): number => PHASES.get(which) ?? 0;
    const level = (name: string): number => LOG_LEVELS.get(name) ?? 2;
    const fns = {
      getBody: (which: string): Uint8Array | undefined => host.body(phase(which)) ?? undefined,
      bodyFind: (which: string, bytes: Uint8Array): number => host.bodyFind(phase(which), bytes),
      setBody: (which: string, bson: Uint8Array): void => host.setBody(phase(which), bson),
      reject: (code: number, codeName: string, message: string): void => host.reject(code, codeName, message),
      replyLocal: (bson: Uint8Array): void => host.replyLocal(bson),
      setRoute: (uri: string): void => host.setRoute(uri),
      setUser: (name: string): void => host.setUser(name),
      log: (lv: string, message: string): void => host.log(level(lv), message),
      logFields: (lv: string, members: string): void => host.logRecord(level(lv), Buffer.from(members, 'utf8')),
      getProperty: (name: string): string | undefined => {
        const id = PROPERTY_IDS.get(name);
        return id === undefined ? undefined : host.property(id) ?? undefined;
      },
      defineMetric: (kind: string, name: string, labels: string[]): number | undefined => {
        const k = METRIC_KINDS.get(kind);
        const id = k === undefined ? -1 : host.defineMetric(k as MetricKind, name, labels);
        return id < 0 ? undefined : id;
      },
      metricSeries: (id: number, values: string[]): number | undefined => {
        const sid = host.metricSeries(id, encodeLabelKey(values));
        return sid < 0 ? undefined : sid;
      },
      incrementMetric: (id: number, delta: number): void => host.increment(id, delta),
      recordMetric: (id: number, value: number): void => host.record(id, value),
      subopBegin: host.timesSubops ? (name: string): void => host.subopBegin(host.subopRecorded() ? name : null) : noop1,
      subopEnd: host.timesSubops ? (): void => host.subopEnd() : noop,
      kvGet: (key: string): Uint8Array | undefined => host.kvGet(key),
      kvSet: (key: string, value: Uint8Array, ttlMs: number): boolean => host.kvSet(key, value, ttlMs),
      kvDelete: (key: string): boolean => host.kvDelete(key),
      nowNs: (): bigint => BigInt(Math.floor(host.nowNs())),
    };
    return fns as unknown as ComponentHostImports;
  }
}

function noop(): void {}
function noop1(_a: string): void {}
