export { UpstreamPool, type PoolWaiter, type PoolOptions, type PoolLogger } from './pool.ts';
export { UpstreamConnection, newRequestId, type ReplyHandler, type UpstreamInfo } from './connection.ts';
export { parseUpstreamUri, resolveUpstreamUri, type UpstreamAddress, type ResolveOptions } from './uri.ts';
export { StaticHostSource, hostKey, type HostSource, type HostAddress } from './host-source.ts';
export { SrvHostSource, DEFAULT_SRV_RESCAN_INTERVAL_MS } from './srv.ts';
export { ScramClient, scramServerKeys, type Credentials, type ScramMechanism } from './scram.ts';
export { UpstreamCall, HOLD_AFTER_FIRE_AND_FORGET_MS, type UpstreamCallOwner, type UpstreamCallStats } from './upstream-call.ts';
export { UpstreamRouter, MAX_PINNED_CURSORS, MAX_PINNED_TRANSACTIONS, TXN_PIN_TTL_MS } from './router.ts';
export { UpstreamCleanup } from './upstream-cleanup.ts';
