#!/usr/bin/env node
// Entry point of the `proxy` command: registers the TypeScript loader, then runs the CLI.
import { register } from 'tsx/esm/api';

// `proxy serve`: a SIGHUP while the modules load (about a second) would end the process, the
// signal's default action. It is held from here on; serve (runtime/cli/main.ts) takes the holder
// over and applies a held signal once the proxy is up.
if (process.argv[2] === 'serve') {
  const startupHup = { held: false, listener: () => { startupHup.held = true; } };
  process.on('SIGHUP', startupHup.listener);
  globalThis[Symbol.for('pipeline-proxy.startup-hup')] = startupHup;
}
register();
await import('../runtime/cli/main.ts');
