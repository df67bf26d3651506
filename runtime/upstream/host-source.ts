// Where the upstream's host list comes from. A `mongodb://` URI gives a fixed list; a
// `mongodb+srv://` URI gives a list that DNS rescans replace (srv.ts). Consumers (the pool today,
// topology monitoring later) read `current()` when they open a connection and may subscribe to
// changes; nothing here is on the per-request path.
import { formatHostPort } from '../config/index.ts';

export interface HostAddress {
  readonly host: string;
  readonly port: number;
}

export interface HostSource {
  /** The hosts to use now, in preference order; never empty. */
  current(): readonly HostAddress[];
  /** Bumped each time `current()` changes. */
  readonly version: number;
  /** Calls `listener` after each change; returns the function that unsubscribes it. */
  onChange(listener: (hosts: readonly HostAddress[]) => void): () => void;
  /** Stops background work (DNS rescans); `current()` keeps answering the last list. */
  close(): void;
}

/** `host:port`, with IPv6 literals bracketed; host names compare case-insensitively. */
export function hostKey(h: HostAddress): string {
  return formatHostPort(h.host.toLowerCase(), h.port);
}

/** The hosts of a `mongodb://` URI: they never change. */
export class StaticHostSource implements HostSource {
  readonly version = 1;
  private readonly hosts: readonly HostAddress[];

  constructor(hosts: readonly HostAddress[]) {
    if (hosts.length === 0) throw new Error('a host list needs at least one host');
    this.hosts = hosts;
  }

  current(): readonly HostAddress[] {
    return this.hosts;
  }

  onChange(): () => void {
    return noop;
  }

  close(): void {}
}

function noop(): void {}
