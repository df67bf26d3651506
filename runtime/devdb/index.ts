// The embedded development upstream (devdb): a MongoDB wire-protocol server over an in-memory
// store. For development, demos, tests and benchmarks — not a database.
export { DevDbServer, type DevDbOptions } from './server.ts';
export { DevEngine } from './engine/index.ts';
