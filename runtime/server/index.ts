export { ProxyServer, type ProxyServerOptions } from './proxy-server.ts';
export type { ServerStats } from './context.ts';
export { parseAppName, HELLO_COMMANDS, type ClientMetadata } from './handshake.ts';
