// Cursor and transaction pins across workers. A driver may send a cursor's getMore, or the next
// statement of a transaction, on any of its pooled connections, and with several workers that
// connection may sit on a worker that did not open the cursor or start the transaction; with a
// replica set or a mongos list, the request must still reach the server that holds it. Each worker
// pins locally (upstream/router.ts) and publishes the pin here; a worker that gets a request it has
// no pin for asks (the rare path, counted). The primary keeps the table; a question about a key not
// yet published waits a moment, since the publishing worker's message and the asking worker's
// question travel on different channels.
import { CURSOR_PIN_TTL_MS, MAX_PINNED_CURSORS, type SharedPins } from '../upstream/index.ts';
import { askPrimary, sendEvent } from '../ipc/worker-channel.ts';

/** How long a question about an unknown cursor waits for its pin to be published. */
export const LOOKUP_WAIT_MS = 250;
/** How long a worker waits for the primary's answer before the topology selects the server. */
const ASK_TIMEOUT_MS = 2000;

interface Waiting { resolve: (server: string | null) => void; timer: NodeJS.Timeout }

/** The primary's table: pin key (`c:<cursor id>`, `t:<txnNumber>:<lsid>`) → the server key (UpstreamRouter.serverKey) it lives on. */
export class PinTable {
  private readonly pins = new Map<string, { server: string; expiresAt: number }>();
  private readonly waiting = new Map<string, Waiting[]>();
  /** Questions answered (found), and not found within LOOKUP_WAIT_MS. */
  found = 0;
  missed = 0;

  publish(id: string, server: string): void {
    const now = Date.now();
    // Oldest first (insertion order): expired and overflowing entries go from the front.
    for (const [k, v] of this.pins) {
      if (v.expiresAt > now && this.pins.size < MAX_PINNED_CURSORS) break;
      this.pins.delete(k);
    }
    this.pins.set(id, { server, expiresAt: now + CURSOR_PIN_TTL_MS });
    const w = this.waiting.get(id);
    if (w === undefined) return;
    this.waiting.delete(id);
    for (const x of w) {
      clearTimeout(x.timer);
      x.resolve(server);
    }
  }

  unpublish(id: string): void {
    this.pins.delete(id);
  }

  get size(): number {
    return this.pins.size;
  }

  lookup(id: string): Promise<string | null> {
    const pin = this.pins.get(id);
    if (pin !== undefined && pin.expiresAt > Date.now()) {
      this.found++;
      pin.expiresAt = Date.now() + CURSOR_PIN_TTL_MS;
      return Promise.resolve(pin.server);
    }
    return new Promise((resolve) => {
      const list = this.waiting.get(id) ?? [];
      const entry: Waiting = {
        resolve: (s) => { if (s === null) this.missed++; else this.found++; resolve(s); },
        timer: setTimeout(() => {
          const l = this.waiting.get(id);
          if (l !== undefined) {
            l.splice(l.indexOf(entry), 1);
            if (l.length === 0) this.waiting.delete(id);
          }
          entry.resolve(null);
        }, LOOKUP_WAIT_MS),
      };
      list.push(entry);
      this.waiting.set(id, list);
    });
  }
}

/** A worker's view of the primary's table (what its UpstreamRouter is given). */
export const workerPins: SharedPins = {
  publish(key, server) { sendEvent('pin', { key, server }); },
  unpublish(key) { sendEvent('unpin', { key }); },
  lookup(key) { return askPrimary<string | null>('pin', key, ASK_TIMEOUT_MS); },
};
