// Host imports: the plugin side of the ABI. The declarations and enums are generated into abi.ts
// from runtime/wasm/abi-spec.ts (npm run abi); this file adds the helpers every wrapper uses.
// Strings cross the boundary as UTF-16LE (AssemblyScript's native form: pointer + byte length) so
// neither side allocates an encoded copy; byte payloads (BSON, kv values) are raw.
export * from "./abi";
import { proxy_abort } from "./abi";

/** Routes AssemblyScript's `abort` (asconfig `use: abort=…`) to the host, which turns it into a trap. */
export function abortHandler(message: string | null, fileName: string | null, line: u32, column: u32): void {
  proxy_abort(changetype<usize>(message), changetype<usize>(fileName), line, column);
  unreachable();
}

// @ts-ignore: decorator
@inline export function strPtr(s: string): usize { return changetype<usize>(s); }
// @ts-ignore: decorator
@inline export function strLen(s: string): i32 { return s.length << 1; }
