#!/usr/bin/env node
// Entry point of the `proxy` command: registers the TypeScript loader, then runs the CLI.
import { register } from 'tsx/esm/api';
register();
await import('../runtime/cli/main.ts');
