// Public surface of the file helpers shared by the layers above (config, upstream, wasm, server).
export { readRegularFile, readRegularFileSync, readRegularFileStatSync } from './regular-file.ts';
export { readFileOrPipe, type ReadLimits } from './file-or-pipe.ts';
