// The recent log lines of a running proxy, for `proxy logs` (GET /api/v1/logs on the admin port):
// a ring of the last `capacity` JSON lines, and the followers that get each new line as it is
// written. Lines from the plugin log path arrive as bytes (a copy of the line the sink wrote — not
// re-encoded) and are decoded only when read.
const decoder = new TextDecoder();

export type LogFollower = (line: string) => void;

/** Where a logger puts a copy of each JSON line besides its sink: the ring, or (in a worker) the forwarder to the primary's ring. */
export interface LogLines {
  push(line: string | Uint8Array): void;
}

export class LogRing implements LogLines {
  readonly capacity: number;
  private readonly lines: Array<string | Uint8Array>;
  /** Lines pushed since start (the next line's sequence number). */
  private total = 0;
  private followers: LogFollower[] = [];

  constructor(capacity: number) {
    this.capacity = capacity;
    this.lines = new Array(capacity);
  }

  /** One JSON line (with its trailing newline or without). */
  push(line: string | Uint8Array): void {
    if (this.capacity > 0) this.lines[this.total % this.capacity] = line;
    this.total++;
    if (this.followers.length > 0) {
      const text = typeof line === 'string' ? line : decoder.decode(line);
      for (const f of this.followers) f(text);
    }
  }

  /** The last `n` lines (at most the capacity), oldest first, each without its newline. */
  recent(n: number): string[] {
    const count = Math.min(n, this.capacity, this.total);
    const out: string[] = [];
    for (let i = this.total - count; i < this.total; i++) {
      const l = this.lines[i % this.capacity];
      const s = typeof l === 'string' ? l : decoder.decode(l);
      out.push(s.endsWith('\n') ? s.slice(0, -1) : s);
    }
    return out;
  }

  /** Calls `fn` with every line written from now on. Returns the unsubscribe function. */
  follow(fn: LogFollower): () => void {
    this.followers = [...this.followers, fn];
    return () => {
      this.followers = this.followers.filter((f) => f !== fn);
    };
  }
}
