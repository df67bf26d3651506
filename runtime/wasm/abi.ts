// The host's view of the ABI: names and enum values taken from abi-spec.ts (the one source), plus
// the host-only constants. See abi-spec.ts for what is generated from it.
import type { LogLevel } from '../log/index.ts';
import {
  ACTION, PHASE, CALL_FLAG, PROPERTY, PHASE_MASK, METRIC_KIND, LOG_LEVEL, enumValues, CORE_EXPORTS, ABI_VERSION_EXPORT, limit,
} from './abi-spec.ts';

export { ABI_VERSION, IMPORT_MODULE, ABI_VERSION_EXPORT, WIT_PACKAGE, WIT_VERSION } from './abi-spec.ts';

function exportName(name: string): string {
  const e = CORE_EXPORTS.find((x) => x.name === name);
  if (e === undefined) throw new Error(`abi-spec.ts has no export ${name}`);
  return e.name;
}

/** Plugin exports. Only the callbacks a module exports are called. */
export const Export = {
  memory: exportName('memory'),
  abiVersion: exportName(ABI_VERSION_EXPORT),
  alloc: exportName('proxy_alloc'),
  onConfigure: exportName('proxy_on_configure'),
  onRequest: exportName('proxy_on_request'),
  onResponse: exportName('proxy_on_response'),
  onRequestDone: exportName('proxy_on_request_done'),
  /** Added by the metering pass (metering.ts): remaining fuel of the current call. */
  fuel: exportName('__proxy_fuel'),
} as const;

/** Return value of on_request / on_response. */
export const Action = enumValues(ACTION);
export type Action = (typeof Action)[keyof typeof Action];

/** Flag bits passed to on_request / on_response. */
export const CallFlag = enumValues(CALL_FLAG);
export type CallFlag = (typeof CallFlag)[keyof typeof CallFlag];

/** Ids for proxy_get_property / proxy_get_number. */
export const Property = enumValues(PROPERTY);
export type Property = (typeof Property)[keyof typeof Property];

/** Which phase of an exchange: `Phase.Request` (0) or `Phase.Response` (1), the core ABI's numbers
 *  (Property.Phase). The one spelling of "a phase" in the runtime. */
export const Phase = enumValues(PHASE);
export type Phase = (typeof Phase)[keyof typeof Phase];
/** The name of each Phase (its WIT case): what the Phase property, profiles and logs show. */
const PHASE_NAMES = Object.values(PHASE.members).sort((a, b) => a.value - b.value).map((m) => m.wit);
export type PhaseName = (typeof PHASE_NAMES)[number];
export function phaseName(phase: Phase): PhaseName {
  return PHASE_NAMES[phase]!;
}

/** A set of phases, as the bits of proxy_set_phases: the phases whose callback does something
 *  (others are not called); 0 is the empty set. The SDK calls it `Phases`. */
export const PhaseMask = enumValues(PHASE_MASK);
export type PhaseMask = 0 | (typeof PhaseMask)[keyof typeof PhaseMask];

/** The bit of `phase` in a PhaseMask. */
export function phaseBit(phase: Phase): PhaseMask {
  return phase === Phase.Request ? PhaseMask.Request : PhaseMask.Response;
}

export const MetricKind = enumValues(METRIC_KIND);
export type MetricKind = (typeof MetricKind)[keyof typeof MetricKind];

/** The ABI's numbers of the log levels (proxy_log's `level`; the SDK's LogLevel). */
export const AbiLogLevel = enumValues(LOG_LEVEL);
export type AbiLogLevel = (typeof AbiLogLevel)[keyof typeof AbiLogLevel];
/** The log level (runtime/log/levels.ts) of each AbiLogLevel value: the WIT case names are the
 *  level names (a case name that is not one does not compile here). */
export const LOG_LEVEL_NAMES: readonly LogLevel[] = Object.values(LOG_LEVEL.members).sort((a, b) => a.value - b.value).map((m) => m.wit);

/** Label names a plugin metric may declare. */
export const MAX_METRIC_LABELS = limit('MAX_METRIC_LABELS');
/** Label sets a plugin metric holds per graph (past it: the `other` set, counted as overflow). */
export const MAX_LABEL_SETS = limit('MAX_LABEL_SETS');
/** Characters of a label value the host keeps. */
export const MAX_LABEL_VALUE_CHARS = limit('MAX_LABEL_VALUE_CHARS');
/** Request contexts open at once per instance. */
export const MAX_REQUEST_CONTEXTS = limit('MAX_REQUEST_CONTEXTS');

/** Plugin metric names must match this (SPEC §2.5 `proxy_plugin_<...>`). */
export const PLUGIN_METRIC_NAME = /^proxy_plugin_[a-z0-9_]+$/;

/** Default fuel per callback (loop iterations + entries into functions that call module functions: metering.ts). */
export const DEFAULT_FUEL = 50_000_000;
/** WebAssembly page size. */
export const PAGE_BYTES = 65536;
