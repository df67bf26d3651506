export { ProxyServer, type ProxyServerOptions } from './proxy-server.ts';
export type { ServerStats } from './context.ts';
export { parseAppName, HELLO_COMMANDS, type ClientMetadata } from './handshake.ts';
export { type ClientAuthSettings } from './client-auth.ts';
export { scramKeysFromSaltedPassword, type ScramCredential } from './client-auth-scram.ts';
