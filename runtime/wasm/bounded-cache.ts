// A small LRU map for the host's compile caches (compiled modules, loaded components): shared by
// every graph of one WasmHost so a reload or a candidate of the same module compiles nothing, and
// bounded so a proxy reloaded with ever-new module versions does not keep every old one alive.
export class BoundedCache<K, V> {
  readonly max: number;
  private readonly map = new Map<K, V>();

  constructor(max: number) {
    this.max = max;
  }

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      // Map keeps insertion order: re-inserting marks the entry most recently used.
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): void {
    this.map.delete(key);
  }
}
