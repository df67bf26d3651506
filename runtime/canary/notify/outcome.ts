// The result of one delivery attempt, and how an HTTP answer maps to it (webhook and pager alike).

export type Outcome =
  | { ok: true; detail: string }
  /** retry false: the receiver refused the message for good (no point in sending it again). */
  | { ok: false; retry: boolean; error: string; retryAfterMs?: number };

/** 2xx delivered; 408, 429 and 5xx retried (429/503 with Retry-After honoured); any other status given up. */
export function httpOutcome(status: number, body: string, retryAfter: string | undefined): Outcome {
  if (status >= 200 && status < 300) return { ok: true, detail: `HTTP ${status}` };
  const error = `HTTP ${status}${body ? `: ${body.slice(0, 200)}` : ''}`;
  if (status === 408 || status === 429 || status >= 500) {
    const out: Outcome = { ok: false, retry: true, error };
    const ms = retryAfterMs(retryAfter);
    if (ms !== undefined) out.retryAfterMs = ms;
    return out;
  }
  return { ok: false, retry: false, error };
}

function retryAfterMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
