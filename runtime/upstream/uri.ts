// Parsing of `upstream.uri` (mongodb://host:port[/db][?options]). A single host is proxied; a list
// uses the first reachable host in order (the proxy fronts one server or one mongos per URI).
import { ProxyError, ErrorCodes } from '../errors/index.ts';

export interface UpstreamAddress {
  readonly uri: string;
  readonly hosts: readonly { host: string; port: number }[];
  readonly username: string | null;
}

export function parseUpstreamUri(uri: string): UpstreamAddress {
  const m = /^mongodb:\/\/(?:([^@/]*)@)?([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(uri);
  if (m === null) {
    throw new ProxyError(ErrorCodes.BadValue, `upstream.uri "${uri}" is not a mongodb:// URI (mongodb+srv is not supported)`);
  }
  const hosts = m[2].split(',').map((h) => {
    const hm = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(h);
    if (hm === null) throw new ProxyError(ErrorCodes.BadValue, `upstream.uri host "${h}" is not host[:port]`);
    const port = hm[2] === undefined ? 27017 : Number(hm[2]);
    if (!(port > 0 && port < 65536)) throw new ProxyError(ErrorCodes.BadValue, `upstream.uri port ${hm[2]} is out of range`);
    return { host: hm[1].replace(/^\[|\]$/g, ''), port };
  });
  const username = m[1] ? decodeURIComponent(m[1].split(':')[0]) : null;
  return { uri, hosts, username };
}
