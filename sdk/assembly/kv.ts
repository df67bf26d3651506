import { proxy_kv_get, proxy_kv_set, proxy_kv_delete, strPtr, strLen } from "./host";

const INITIAL = 256;

/** Host-side key/value store of this plugin: survives instance rebuilds and reloads, capped
 *  in bytes per plugin, entries expire after their TTL (0 = no expiry). */
export namespace kv {
  /** The value, or null when absent or expired. */
  export function get(key: string): Uint8Array | null {
    let buf = new Uint8Array(INITIAL);
    let n = proxy_kv_get(strPtr(key), strLen(key), buf.dataStart, INITIAL);
    if (n < 0) return null;
    if (n > INITIAL) {
      buf = new Uint8Array(n);
      n = proxy_kv_get(strPtr(key), strLen(key), buf.dataStart, n);
      if (n < 0) return null;
    }
    return buf.subarray(0, n);
  }
  /** False when the plugin's byte cap would be exceeded. */
  export function set(key: string, value: Uint8Array, ttlMs: i32 = 0): bool {
    return proxy_kv_set(strPtr(key), strLen(key), value.dataStart, value.length, ttlMs) == 0;
  }
  export function getString(key: string): string | null {
    const v = get(key);
    return v === null ? null : String.UTF8.decode(v.buffer.slice(v.byteOffset, v.byteOffset + v.length));
  }
  export function setString(key: string, value: string, ttlMs: i32 = 0): bool {
    return set(key, Uint8Array.wrap(String.UTF8.encode(value)), ttlMs);
  }
  export function remove(key: string): bool { return proxy_kv_delete(strPtr(key), strLen(key)) == 0; }
}
