// Which module a candidate step's `plugin_id` may load. A canary is started by a bearer-token
// holder over HTTP, so the id is untrusted input: a path is allowed only when its real location (`..`
// resolved, every symlink followed) is a regular `.wasm` file inside an allowed plugin directory —
// the built-in plugin directory, the directories of the modules the configuration's steps load, and
// `canary.plugin_dirs` — and anything else must name an installed npm package by a valid package
// name. Every refusal — outside the directories, absent, not a file, not a valid package name, a
// package not installed — is the same error with the same message, so the answer tells nobody
// whether a file or package exists (no existence oracle).
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join, relative, resolve } from 'node:path';

/** npm's package name rules (lowercase, URL-safe, optional scope); `@version` is split off before. */
const PACKAGE_NAME = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;

export class PluginNotAllowedError extends Error {
  constructor(step: string, pluginId: string) {
    super(`step ${step}: plugin_id ${JSON.stringify(pluginId)} is not an allowed plugin (a .wasm file in an allowed plugin directory — the ` +
      `built-in one, those of the configured steps' modules, canary.plugin_dirs — or an installed npm package)`);
    this.name = 'PluginNotAllowedError';
  }
}

/** `name@1.2.3` / `@scope/name@1.2.3` → [name, version]. */
export function splitPackage(id: string): [string, string | null] {
  const at = id.lastIndexOf('@');
  return at > 0 ? [id.slice(0, at), id.slice(at + 1)] : [id, null];
}

/** The real path of `p`, or null when it does not resolve (absent, a dangling link, no permission). */
function real(p: string): string | null {
  try {
    return realpathSync(p);
  } catch {
    return null;
  }
}

function inside(dir: string, file: string): boolean {
  const rel = relative(dir, file);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

/**
 * The allowed directories, each by its real path (directories that do not exist are left out).
 * `dirs` are resolved from the working directory.
 */
export function allowedDirs(dirs: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const d of dirs) {
    const r = real(resolve(d));
    if (r !== null) out.add(r);
  }
  return [...out];
}

/**
 * The real path of the `.wasm` file `pluginId` names (resolved from the working directory) when it is
 * a regular file inside one of `dirs` (real paths, from allowedDirs); else PluginNotAllowedError.
 */
export function allowedModulePath(step: string, pluginId: string, dirs: readonly string[]): string {
  const file = real(resolve(pluginId));
  if (file !== null && dirs.some((d) => inside(d, file))) {
    try {
      if (statSync(file).isFile()) return file;
    } catch { /* gone meanwhile: refused like any other */ }
  }
  throw new PluginNotAllowedError(step, pluginId);
}

/**
 * The installed version of the npm package `pluginId` names (`name` or `name@version`), looked up
 * along the node_modules paths of the working directory (its manifest, which a package's `exports`
 * may hide from require.resolve); PluginNotAllowedError when the name is not a valid package name or
 * no such package is installed.
 */
export function installedPackageVersion(step: string, pluginId: string): string {
  const [pkg] = splitPackage(pluginId);
  if (PACKAGE_NAME.test(pkg)) {
    const req = createRequire(join(process.cwd(), 'package.json'));
    for (const d of req.resolve.paths(pkg) ?? []) {
      const manifest = join(d, pkg, 'package.json');
      let text: string;
      try {
        text = readFileSync(manifest, 'utf8');
      } catch {
        continue; // not installed here
      }
      try {
        const version = (JSON.parse(text) as { version?: unknown }).version;
        return typeof version === 'string' ? version : '';
      } catch {
        return '';
      }
    }
  }
  throw new PluginNotAllowedError(step, pluginId);
}
