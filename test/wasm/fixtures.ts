// Builds test/fixtures/plugins/* once (skips up-to-date outputs) and returns their .wasm paths.
import { join, resolve } from 'node:path';
import { buildPlugins } from '../../scripts/build-plugins.mjs';

export const FIXTURE_DIR = resolve('build/test-plugins');
let built: Promise<unknown> | null = null;

export async function fixture(name: string): Promise<string> {
  built ??= buildPlugins({ bases: ['test/fixtures/plugins'], outDir: FIXTURE_DIR, log: () => {} });
  await built;
  return join(FIXTURE_DIR, `${name}.wasm`);
}
