// Requests a graph's steps rejected, by step and error code. Rejected requests never reach the
// response phase, so the logging and metrics steps cannot see them: the graph counts them itself
// (exported as proxy_pipeline_rejections_total) and logs each at debug. Codes are chosen by
// plugins, so the distinct (step, code) pairs are capped; past the cap a pair is counted as
// code "other".

export const MAX_REJECTION_SERIES = 64;

export interface RejectionSeries {
  readonly step: string;
  /** The error code as a string, or "other" past the cap. */
  readonly code: string;
  count: number;
}

export class RejectionCounts {
  private readonly series = new Map<string, RejectionSeries>();

  add(step: string, code: number): void {
    let key = `${step}\0${code}`;
    let s = this.series.get(key);
    if (s === undefined) {
      let label = String(code);
      if (this.series.size >= MAX_REJECTION_SERIES) {
        key = `${step}\0other`;
        label = 'other';
        s = this.series.get(key);
      }
      if (s === undefined) {
        s = { step, code: label, count: 0 };
        this.series.set(key, s);
      }
    }
    s.count++;
  }

  /** Every series so far (for the metrics exposition). */
  all(): IterableIterator<RejectionSeries> {
    return this.series.values();
  }

  total(): number {
    let n = 0;
    for (const s of this.series.values()) n += s.count;
    return n;
  }
}
