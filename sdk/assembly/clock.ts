import { proxy_now } from "./host";

/** Host monotonic clock in nanoseconds. */
export function nowNs(): i64 { return proxy_now(); }
