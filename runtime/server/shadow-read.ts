// A shadow canary's own read (`shadow_upstream_reads`, docs/canary.md "Shadow canaries"): when the
// candidate would send a different find, count or distinct than the baseline did, its command is
// sent upstream on a call of its own — after the client's answer was written, never for a write —
// and the candidate's response phase runs over that reply, so the canary can compare what each
// graph would have answered. The command goes without the client's `lsid` (a session is checked out
// by one operation at a time: the client's next command must never wait for the shadow's), and a
// find with `singleBatch: true` (no cursor is left open upstream). The canary bounds how many are
// under way (ShadowNext.Fetch) and frees the slot in fetched(), whatever the outcome.
import { ElementCursor, encodeOpMsg, firstKey, parseOpMsg, utf8 } from '../wire/index.ts';
import { UpstreamCall, newRequestId, type ConnectionSource, type UpstreamCallOwner } from '../upstream/index.ts';
import { Verdict, type Exchange, type GraphShadow } from '../pipeline/index.ts';
import type { ProxyError } from '../errors/index.ts';

const K_LSID = utf8('lsid');
const K_SINGLE_BATCH = utf8('singleBatch');
/** The element `singleBatch: true` (type 0x08, boolean). */
const SINGLE_BATCH_TRUE = Buffer.concat([Buffer.from([0x08]), Buffer.from('singleBatch\0'), Buffer.from([1])]);

/** `cmd` as the shadow sends it: without `lsid` and, for a find, with `singleBatch: true` (a new buffer). */
export function shadowReadCommand(cmd: Buffer): Buffer {
  const find = firstKey(cmd) === 'find';
  const parts: Buffer[] = [];
  const cur = new ElementCursor().open(cmd, 0);
  let at = 4;
  while (cur.next()) {
    if (cur.nameIs(K_LSID) || (find && cur.nameIs(K_SINGLE_BATCH))) {
      parts.push(cmd.subarray(at, cur.at));
      at = cur.valueEnd;
    }
  }
  parts.push(cmd.subarray(at, cmd.length - 1));
  if (find) parts.push(SINGLE_BATCH_TRUE);
  const body = Buffer.concat([Buffer.alloc(4), ...parts, Buffer.from([0])]);
  body.writeInt32LE(body.length, 0);
  return body;
}

export class ShadowRead implements UpstreamCallOwner {
  private readonly shadow: GraphShadow;
  private readonly ex: Exchange;
  private readonly divergence: object;
  /** A copy of what the client was answered (the upstream's buffers are not kept past a reply). */
  private readonly baselineReply: Uint8Array;
  private readonly call: UpstreamCall;

  /** `ex`: the candidate's exchange after its request phase; `divergence`: the canary's record of the request. */
  constructor(shadow: GraphShadow, ex: Exchange, divergence: object, baselineReply: Uint8Array, requestTimeoutMs: number) {
    this.shadow = shadow;
    this.ex = ex;
    this.divergence = divergence;
    this.baselineReply = baselineReply;
    // Its own counters: a shadow read's failure is the canary's business, not the proxy's upstream errors.
    this.call = new UpstreamCall(this, { upstreamErrors: 0, retriedUnsent: 0 }, requestTimeoutMs);
  }

  /** Sends the candidate's command (shadowReadCommand) through `source`. */
  start(source: ConnectionSource, cmd: Buffer): void {
    this.call.start(source, encodeOpMsg(newRequestId(), 0, 0, cmd), true, firstKey(cmd), false);
  }

  onCallReply(frame: Buffer): void {
    const ex = this.ex;
    let reply: Uint8Array | null = null;
    let rejected = false;
    try {
      const body = parseOpMsg(frame).body;
      ex.replyBody = body;
      this.shadow.candidate.runResponse(ex);
      rejected = (ex.verdict as Verdict) === Verdict.Reject;
      reply = rejected ? body : ex.newReply ?? body;
    } catch {
      reply = null;
    }
    this.call.close();
    this.shadow.fetched(this.divergence, this.baselineReply, reply, rejected);
  }

  onCallSent(): void {
    // Never: a read expects a reply.
  }

  onCallError(_err: ProxyError): void {
    this.fail();
  }

  /** The read could not be made or failed: the canary records it and frees its slot. */
  fail(): void {
    this.call.close();
    this.shadow.fetched(this.divergence, this.baselineReply, null, false);
  }
}
