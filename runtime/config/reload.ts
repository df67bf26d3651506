// What a reload cannot apply: the running configuration and the next one compared along the
// schema, each changed key judged by its mark (applies.ts). The proxy applies the rest and names
// these in its warning; nothing here is a hand-kept list of keys.
import { isDeepStrictEqual } from 'node:util';
import { appliesOf } from './applies.ts';
import { base, rootEntries, unwrap, type AnySchema, type ProxyConfig } from './schema.ts';

/**
 * The keys that take effect only after a restart and differ between `started` (the configuration
 * whose restart-only values are in effect: the one the proxy started with) and `next`, each named
 * as specifically as the marks allow, e.g. `["upstream.pool_size", "profiling"]` (the whole
 * `profiling` block was added or removed). Record members and array items are named by their key
 * and index: `steps.cache.module`, `auth.users[1].name`.
 */
export function restartKeys(started: ProxyConfig, next: ProxyConfig): string[] {
  const out: string[] = [];
  walkEntries(rootEntries(), started, next, '', out);
  return out;
}

type Values = Record<string | number, unknown> | undefined;

function walkEntries(entries: Record<string, AnySchema>, a: unknown, b: unknown, prefix: string, out: string[]): void {
  for (const [key, schema] of Object.entries(entries)) diffKey(schema, (a as Values)?.[key], (b as Values)?.[key], prefix + key, out);
}

function diffKey(schema: AnySchema, a: unknown, b: unknown, path: string, out: string[]): void {
  if (isDeepStrictEqual(a, b)) return;
  const mark = appliesOf(schema);
  const applies = mark?.on ?? 'restart'; // unmarked (a test forbids it): the safe answer
  const presenceChanged = (a === undefined) !== (b === undefined);
  if (presenceChanged && applies !== 'reload' && !(mark?.on === 'partial' && mark.presence === 'reload')) {
    out.push(path);
    return;
  }
  const before = out.length;
  if (!diffChildren(base(unwrap(schema).inner), a, b, path, out)) {
    if (applies !== 'reload') out.push(path);
    return;
  }
  // A restart block changed inside names its changed keys; should none be marked restart, the
  // block itself is named.
  if (applies === 'restart' && out.length === before) out.push(path);
}

/** Compares the keys inside a block, record or array of blocks; false when the schema is a leaf. */
function diffChildren(inner: AnySchema, a: unknown, b: unknown, path: string, out: string[]): boolean {
  if ((inner.type === 'strict_object' || inner.type === 'object') && inner.entries !== undefined) {
    walkEntries(inner.entries, a, b, `${path}.`, out);
    return true;
  }
  if (inner.type === 'record') {
    const value = base(unwrap(inner.value as AnySchema).inner);
    if (value.type !== 'strict_object' || value.entries === undefined) return false;
    const names = new Set([...Object.keys((a as object | undefined) ?? {}), ...Object.keys((b as object | undefined) ?? {})]);
    for (const name of names) walkEntries(value.entries, (a as Values)?.[name], (b as Values)?.[name], `${path}.${name}.`, out);
    return true;
  }
  if (inner.type === 'array') {
    const item = base(unwrap(inner.item as AnySchema).inner);
    if (item.type !== 'strict_object' || item.entries === undefined) return false;
    const n = Math.max((a as unknown[] | undefined)?.length ?? 0, (b as unknown[] | undefined)?.length ?? 0);
    for (let i = 0; i < n; i++) walkEntries(item.entries, (a as unknown[] | undefined)?.[i], (b as unknown[] | undefined)?.[i], `${path}[${i}].`, out);
    return true;
  }
  return false;
}
