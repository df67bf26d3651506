import { proxy_now } from "./host";

/** Host monotonic clock in nanoseconds. */
export function nowNs(): i64 { return <i64>proxy_now(); }
