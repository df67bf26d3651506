// Request start times kept in plugin memory, keyed by connection id (a connection has one request
// in flight at a time). The response phase takes the entry back; entries of requests whose
// response never ran (rejected later in the pipeline, connection dropped) are overwritten by the
// connection's next request, and the table is cleared if it ever exceeds MAX_ENTRIES.
import { Context } from "../../sdk/assembly/index";

const MAX_ENTRIES = 65536;

export class StartTimes {
  private starts: Map<i64, i64> = new Map<i64, i64>();
  private rids: Map<i64, i64> = new Map<i64, i64>();

  put(ctx: Context, now: i64): void {
    const conn = ctx.connectionId;
    if (this.starts.size >= MAX_ENTRIES && !this.starts.has(conn)) { this.starts.clear(); this.rids.clear(); }
    this.starts.set(conn, now);
    this.rids.set(conn, ctx.requestId);
  }

  /** Start time of this exchange's request phase, or -1 (and forgets it). */
  take(ctx: Context): i64 {
    const conn = ctx.connectionId;
    if (!this.starts.has(conn)) return -1;
    const t = this.starts.get(conn);
    const rid = this.rids.get(conn);
    this.starts.delete(conn);
    this.rids.delete(conn);
    return rid == ctx.requestId ? t : -1;
  }
}
