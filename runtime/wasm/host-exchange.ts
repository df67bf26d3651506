// What the host functions need from the request being processed. runtime/pipeline's Exchange
// implements it; declared here so the wasm layer does not depend on the pipeline layer.

export interface HostConnection { readonly id: number; appName: string; clientAddress: string; user: string }

export interface HostExchange {
  readonly conn: HostConnection;
  readonly pipelineId: string;
  readonly op: string;
  readonly db: string;
  readonly collection: string;
  readonly requestBody: Uint8Array;
  readonly sequences: readonly unknown[] | null;
  requestId: number;
  phase: 0 | 1;
  verdict: number;
  rejectCode: number;
  rejectCodeName: string;
  rejectMessage: string;
  localReply: Uint8Array | null;
  newRequest: Uint8Array | null;
  replyBody: Uint8Array | null;
  newReply: Uint8Array | null;
  route: string | null;
  /** The current command document: newRequest, else the body with sequences folded in (lazily, once). */
  requestDocument(): Uint8Array;
}

/** Verdict values (mirrors runtime/pipeline Verdict). */
export const VERDICT_CONTINUE = 0;
export const VERDICT_REJECT = 1;
export const VERDICT_LOCAL_REPLY = 2;
