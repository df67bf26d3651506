export { UpstreamPool, type PoolWaiter, type PoolOptions, type PoolLogger } from './pool.ts';
export { UpstreamConnection, newRequestId, type ReplyHandler, type UpstreamInfo } from './connection.ts';
export { parseUpstreamUri, type UpstreamAddress } from './uri.ts';
export { ScramClient, scramServerKeys, type Credentials, type ScramMechanism } from './scram.ts';
