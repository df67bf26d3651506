// When a change to a configuration key takes effect: one mark on every key of the schema. The
// generated reference shows it (docs/configuration.md, "On reload"), a reload computes the keys it
// could not apply from it (reload.ts), and test/config/applies.test.ts fails on a key without one.
//
//   reload   a changed value applies on reload (SIGHUP, POST /api/v1/reload, a file change)
//   restart  a changed value is named in the reload's warning and applies after a restart
//   partial  a block whose keys differ: adding or removing the block needs a restart (or, with
//            `presence` "reload", applies on reload), a change inside it is decided key by key;
//            `note` says which keys apply in a sentence
import type * as v from 'valibot';

export const APPLIES = Symbol('applies');

export type Applies =
  | { readonly on: 'reload' }
  | { readonly on: 'restart' }
  | { readonly on: 'partial'; readonly note: string; readonly presence: 'reload' | 'restart' };

type Marked = { [APPLIES]?: Applies };

function mark<T extends v.GenericSchema>(schema: T, applies: Applies): T {
  // Each key's mark sits on its own schema object (its optional wrapper, or its pipe): one object
  // shared by two keys would give both the same mark, so it is refused here, when the module loads.
  if ((schema as Marked)[APPLIES] !== undefined) throw new Error('a schema object shared by two keys cannot carry two reload marks; wrap one');
  (schema as Marked)[APPLIES] = applies;
  return schema;
}

/** A change to this key applies on reload. */
export const onReload = <T extends v.GenericSchema>(schema: T): T => mark(schema, { on: 'reload' });

/** A change to this key applies after a restart; a reload names it in a warning. */
export const onRestart = <T extends v.GenericSchema>(schema: T): T => mark(schema, { on: 'restart' });

/**
 * A block whose keys each say when they apply; `note` sums it up. Adding or removing the block
 * needs a restart, unless `presence` is "reload" (then its restart-only keys are named when the
 * block is added or removed).
 */
export const partlyOnReload = <T extends v.GenericSchema>(schema: T, note: string, presence: 'reload' | 'restart' = 'restart'): T =>
  mark(schema, { on: 'partial', note, presence });

/** The mark of a key's schema (its optional wrappers are looked through), or undefined. */
export function appliesOf(schema: unknown): Applies | undefined {
  let s = schema as (Marked & { type?: string; wrapped?: unknown }) | undefined;
  while (s !== undefined) {
    const own = s[APPLIES];
    if (own !== undefined) return own;
    s = s.type === 'optional' || s.type === 'exact_optional' || s.type === 'nullish' ? s.wrapped as typeof s : undefined;
  }
  return undefined;
}
