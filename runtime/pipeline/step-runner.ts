// One step of a pipeline: the plugin slot plus the on_error policy. run() never throws.
import { CALL_FAILED, Phase, type StepSlot } from '../wasm/index.ts';
import { Verdict, type Exchange } from './exchange.ts';
import type { StepTimer } from './recorder.ts';

/** run() result bits. */
export const STOP = 1;
export const ERROR = 2;

/** Default on_error per built-in (DESIGN §4): security-relevant steps fail closed. */
const CLOSED_BY_DEFAULT = new Set(['auth', 'filter', 'rate_limit', 'route']);

export function defaultOnError(name: string): 'open' | 'closed' {
  return CLOSED_BY_DEFAULT.has(name) ? 'closed' : 'open';
}

export class StepRunner {
  /** "wasm:<name>" */
  readonly id: string;
  readonly name: string;
  readonly failOpen: boolean;
  readonly slot: StepSlot;
  /** Its timers in its graph, request and response phase (bound at build when the recorder is on). */
  timers: [StepTimer, StepTimer] | null = null;
  private readonly errorCounters: [{ inc(): void }, { inc(): void }];

  /** `errorCounters`: proxy_step_errors_total of this step in its graph, request and response phase (bound at build). */
  constructor(name: string, slot: StepSlot, onError: 'open' | 'closed', errorCounters: [{ inc(): void }, { inc(): void }]) {
    this.id = `wasm:${name}`;
    this.name = name;
    this.failOpen = onError === 'open';
    this.slot = slot;
    this.errorCounters = errorCounters;
  }

  /** Calls the step; returns 0 (next step), STOP, or ERROR|STOP / ERROR per on_error. */
  run(ex: Exchange, phase: Phase): number {
    const rc = this.slot.call(ex, phase);
    if (rc !== CALL_FAILED) {
      if (rc !== 0) return STOP;
      if (phase === Phase.Request ? ex.verdict !== Verdict.Continue : ex.verdict === Verdict.Reject) return STOP;
      return 0;
    }
    this.errorCounters[phase].inc();
    if (this.failOpen) return ERROR;
    ex.verdict = Verdict.Reject;
    ex.rejectCode = 1;
    ex.rejectCodeName = 'InternalError';
    ex.rejectMessage = `pipeline step ${this.id} failed`;
    return ERROR | STOP;
  }
}
