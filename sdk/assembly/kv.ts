import { proxy_kv_get, proxy_kv_set, proxy_kv_delete, proxy_get_number, Property, strPtr, strLen } from "./host";

const INITIAL = 256;
// Small values (the common case: counters, flags, short entries) land here first, so a get
// allocates only its result, and getString decodes without an intermediate copy.
const scratch = new Uint8Array(INITIAL);

/** Host-side key/value store of this plugin: survives instance rebuilds and reloads, capped
 *  in bytes per plugin, entries expire after their TTL (0 = no expiry). */
export namespace kv {
  /** The store's cap in bytes (the step's `kv_max_bytes`; keys count as UTF-16 bytes plus the
   *  values); -1 on a host that does not say. Readable in onConfigure. */
  export function maxBytes(): i64 {
    const n = proxy_get_number(Property.KvMaxBytes);
    return isNaN(n) ? -1 : <i64>n;
  }

  /** The value, or null when absent or expired. */
  export function get(key: string): Uint8Array | null {
    let n = proxy_kv_get(strPtr(key), strLen(key), scratch.dataStart, INITIAL);
    if (n < 0) return null;
    if (n > INITIAL) {
      const big = new Uint8Array(n);
      n = proxy_kv_get(strPtr(key), strLen(key), big.dataStart, n);
      if (n < 0) return null;
      return big.subarray(0, n);
    }
    const out = new Uint8Array(n);
    memory.copy(out.dataStart, scratch.dataStart, n);
    return out;
  }
  /** Copies the value into `dst` when it fits, without allocating; returns its length (larger
   *  than dst.length: not copied) or -1 when absent or expired. */
  export function getInto(key: string, dst: Uint8Array): i32 {
    return proxy_kv_get(strPtr(key), strLen(key), dst.dataStart, dst.length);
  }
  /** False when the plugin's byte cap would be exceeded. */
  export function set(key: string, value: Uint8Array, ttlMs: i32 = 0): bool {
    return proxy_kv_set(strPtr(key), strLen(key), value.dataStart, value.length, ttlMs) == 0;
  }
  export function getString(key: string): string | null {
    const n = proxy_kv_get(strPtr(key), strLen(key), scratch.dataStart, INITIAL);
    if (n < 0) return null;
    if (n <= INITIAL) return String.UTF8.decodeUnsafe(scratch.dataStart, n);
    const v = get(key);
    return v === null ? null : String.UTF8.decodeUnsafe(v.dataStart, v.length);
  }
  export function setString(key: string, value: string, ttlMs: i32 = 0): bool {
    return set(key, Uint8Array.wrap(String.UTF8.encode(value)), ttlMs);
  }
  export function remove(key: string): bool { return proxy_kv_delete(strPtr(key), strLen(key)) == 0; }

  // For keys built in a reused buffer instead of a string per call: the key is the UTF-16LE bytes
  // key[0, keyBytes) (what a string's characters are in memory).

  /** getInto with such a key. */
  export function getIntoUtf16(key: Uint8Array, keyBytes: i32, dst: Uint8Array): i32 {
    return proxy_kv_get(key.dataStart, keyBytes, dst.dataStart, dst.length);
  }
  /** set with such a key and the value at [value, value+valueLen) of plugin memory. */
  export function setUtf16(key: Uint8Array, keyBytes: i32, value: usize, valueLen: i32, ttlMs: i32 = 0): bool {
    return proxy_kv_set(key.dataStart, keyBytes, value, valueLen, ttlMs) == 0;
  }
  /** remove with such a key. */
  export function removeUtf16(key: Uint8Array, keyBytes: i32): bool { return proxy_kv_delete(key.dataStart, keyBytes) == 0; }
}
