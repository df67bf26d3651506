// TLS on the client-facing listener (configuration key `tls`): the files are read when the proxy
// starts and again on every reload, so a renewed certificate applies to new connections without
// dropping the open ones (tls.Server.setSecureContext). A file that cannot be read, or a
// certificate and key that do not belong together, is refused with the key path — at start before
// any port opens, at reload with the running certificate kept.
import { createSecureContext, type TlsOptions, type TLSSocket } from 'node:tls';
import { ConfigError } from '../config/index.ts';
import { readRegularFileSync } from '../fs/index.ts';
import type { ProxyConfig } from '../config/index.ts';

export type ListenerTlsConfig = NonNullable<ProxyConfig['tls']>;

/** What tls.createServer / setSecureContext take, from the configuration. */
export function listenerTlsOptions(cfg: ListenerTlsConfig, source: string | null = null): TlsOptions {
  const read = (key: 'cert_file' | 'key_file' | 'ca_file'): Buffer | undefined => {
    const path = cfg[key];
    if (path === undefined) return undefined;
    try {
      return readRegularFileSync(path);
    } catch (err) {
      throw new ConfigError(source, [{ path: `tls.${key}`, message: `cannot read ${path}: ${(err as Error).message}` }]);
    }
  };
  const options: TlsOptions = {
    cert: read('cert_file'),
    key: read('key_file'),
    passphrase: cfg.key_passphrase,
    ca: read('ca_file'),
    requestCert: cfg.client_certificates !== 'none',
    // "optional": a client without a certificate is let in; one whose certificate does not verify is
    // dropped by the server after the handshake (refusesPeer).
    rejectUnauthorized: cfg.client_certificates === 'required',
  };
  try {
    createSecureContext(options); // a key that does not match its certificate fails here, not at the first client
  } catch (err) {
    throw new ConfigError(source, [{ path: 'tls', message: `certificate and key refused: ${(err as Error).message}` }]);
  }
  return options;
}

/** "optional" client certificates: a presented certificate that did not verify. */
export function refusesPeer(socket: TLSSocket): boolean {
  if (socket.authorized) return false;
  const cert = socket.getPeerCertificate();
  return cert !== null && Object.keys(cert).length > 0;
}
