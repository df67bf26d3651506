// The host-side key/value stores of one WasmHost, one per (pipeline id, graph variant, step, step
// config). So a candidate's cache never answers a baseline request, nor the reverse, even with the
// same plugin and config; a reload of the same variant keeps a step's data while its config is
// unchanged (a changed config may mean changed keys or values: it starts empty); and the byte cap
// (steps.<name>.kv_max_bytes) follows a reload without losing data. Stores no graph in service uses
// any more are dropped by retain().
import { createHash } from 'node:crypto';
import { KvStore } from './kv-store.ts';
import type { Variant } from '../config/index.ts';

export class KvStores {
  private readonly stores = new Map<string, KvStore>();

  get size(): number {
    return this.stores.size;
  }

  /** The store of `step` in graph (`pipelineId`, `variant`) with this `config`, capped at `maxBytes`. */
  for(pipelineId: string, variant: Variant, step: string, config: unknown, maxBytes: number): KvStore {
    const digest = createHash('sha256').update(JSON.stringify(config ?? {})).digest('base64url');
    const key = `${pipelineId}\0${variant}\0${step}\0${digest}`;
    let store = this.stores.get(key);
    if (store === undefined) {
      store = new KvStore(maxBytes);
      this.stores.set(key, store);
    } else if (store.maxBytes !== maxBytes) {
      store.setMaxBytes(maxBytes);
    }
    return store;
  }

  /** Drops every store not in `inUse` (graphs still finishing requests keep theirs by reference). */
  retain(inUse: ReadonlySet<KvStore>): void {
    for (const [key, store] of this.stores) if (!inUse.has(store)) this.stores.delete(key);
  }
}
