// Pre-promotion gates (Flagger's confirm-promotion webhook): a stage's `gate: { url, timeout_ms }`
// is POSTed the canary's state before the canary leaves that stage; only a 2xx answer within the
// timeout lets it advance. Anything else — another status, a timeout, a refused connection — holds
// the stage; the evaluation asks again at its next tick. Each answer is evidence in the history.
import { postJson } from './notify/http-post.ts';
import { USER_AGENT } from '../version.ts';

export interface StageGate {
  url: string;
  timeout_ms: number;
}

export interface GateResult {
  ok: boolean;
  /** `HTTP 200`, `HTTP 500: …`, `no answer within 5000 ms`, `ECONNREFUSED: …`. */
  detail: string;
  ms: number;
}

/** One gate call; never rejects. */
export type GateCaller = (gate: StageGate, payload: Record<string, unknown>) => Promise<GateResult>;

export const httpGate: GateCaller = async (gate, payload) => {
  const t0 = performance.now();
  const out = await postJson(gate.url, JSON.stringify(payload), { 'user-agent': USER_AGENT, 'x-proxy-gate': 'confirm-promotion' }, gate.timeout_ms);
  const ms = Math.round(performance.now() - t0);
  return out.ok ? { ok: true, detail: out.detail, ms } : { ok: false, detail: out.error, ms };
};
