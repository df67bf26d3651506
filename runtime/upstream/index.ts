export { UpstreamPool, type PoolWaiter, type PoolOptions, type ConnectionSource } from './pool.ts';
export { UpstreamConnection, newRequestId, type ReplyHandler, type UpstreamInfo } from './connection.ts';
export { parseUpstreamUri, resolveUpstreamUri, type UpstreamAddress, type ResolveOptions } from './uri.ts';
export { StaticHostSource, hostKey, type HostSource, type HostAddress } from './host-source.ts';
export { SrvHostSource, DEFAULT_SRV_RESCAN_INTERVAL_MS } from './srv.ts';
export { ScramClient, scramServerKeys, type Credentials, type ScramMechanism } from './scram.ts';
export { UpstreamCall, HOLD_AFTER_FIRE_AND_FORGET_MS, type UpstreamCallOwner, type UpstreamCallStats } from './upstream-call.ts';
export {
  UpstreamRouter, type SharedPins, MAX_ROUTED_UPSTREAMS, MAX_PINNED_CURSORS, MAX_PINNED_TRANSACTIONS, TXN_PIN_TTL_MS, CURSOR_PIN_TTL_MS,
} from './router.ts';
export { Topology, TopologyServer, isStateChangeError, type TopologyOptions, type TopologyKind, type TopologyReadiness, type ServerType } from './topology.ts';
export { ReadPreferenceReader, ReplicaSetSelector, PRIMARY, type ReadPreference, type ReadPreferenceMode } from './read-preference.ts';
export { ServerMonitor, MIN_HEARTBEAT_MS } from './server-monitor.ts';
export { UpstreamCleanup } from './upstream-cleanup.ts';
