// Rate limit for log lines a client can trigger at will (malformed frames, unframeable input):
// garbage is answered and counted on every occurrence, but logged at most `perSecond` times a
// second, and the next line that gets through says how many were suppressed. Without this a
// fuzzing client turns the proxy's log into its own amplifier.
import { performance } from 'node:perf_hooks';

export class LogThrottle {
  private readonly perSecond: number;
  private windowStart = 0;
  private inWindow = 0;
  private suppressed = 0;

  constructor(perSecond: number) {
    this.perSecond = perSecond;
  }

  /**
   * Returns -1 when this occurrence must not be logged; otherwise the number of occurrences
   * suppressed since the last one logged (to put in the line).
   */
  take(now = performance.now()): number {
    if (now - this.windowStart >= 1000) {
      this.windowStart = now;
      this.inWindow = 0;
    }
    if (this.inWindow >= this.perSecond) {
      this.suppressed++;
      return -1;
    }
    this.inWindow++;
    const s = this.suppressed;
    this.suppressed = 0;
    return s;
  }
}
