// The embedded development upstream (devdb): a MongoDB wire-protocol server over an in-memory
// store. For development, demos, tests and benchmarks — not a database.
export { DevDbServer, type DevDbOptions, type DevMember } from './server.ts';
export { DevEngine } from './engine/index.ts';
export { DevReplicaSet, DevReplicaMember, DevMongos } from './replica-set.ts';
