// The proxy's version: package.json's `version`, read once when the module loads. Everything that
// names the version (`proxy --version`, the ready banner, the upstream handshake's client metadata,
// the notification channels' User-Agent) takes it from here, so a release changes one file.
import { readFileSync } from 'node:fs';

export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** The User-Agent of the proxy's own HTTP requests (notification channels). */
export const USER_AGENT = `pipeline-proxy/${VERSION}`;
