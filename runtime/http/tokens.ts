// The bearer tokens an HTTP app accepts: one live holder per app, read on every request, so a
// reload that replaces them (rotation) refuses the old tokens from the next request on.
import { timingSafeEqual } from 'node:crypto';

export class Tokens {
  private list: Buffer[];
  /** Called after every replace(): holders of long-lived sessions (the canary feed) check theirs again. */
  private readonly replaced = new Set<() => void>();

  /**
   * @param tokens the accepted tokens (empty strings are ignored)
   * @param openWhenEmpty with no token, let every request through (the profiling endpoint without
   *   `profiling.token`); false: with no token every request is refused (admin, control plane)
   */
  constructor(tokens: readonly string[] = [], readonly openWhenEmpty = false) {
    this.list = Tokens.encode(tokens);
  }

  private static encode(tokens: readonly string[]): Buffer[] {
    return tokens.filter((t) => t.length > 0).map((t) => Buffer.from(t));
  }

  /** Accepts exactly these tokens from now on. */
  replace(tokens: readonly string[]): void {
    this.list = Tokens.encode(tokens);
    for (const listener of this.replaced) listener();
  }

  /** Calls `listener` after each replace(); returns the function that stops it. */
  onReplace(listener: () => void): () => void {
    this.replaced.add(listener);
    return () => this.replaced.delete(listener);
  }

  get size(): number {
    return this.list.length;
  }

  /** Whether a request with this Authorization header may pass. */
  allows(header: string | undefined): boolean {
    if (this.list.length === 0) return this.openWhenEmpty;
    // The scheme name is case-insensitive (RFC 7235 §2.1): "bearer", "BEARER" pass as "Bearer" does.
    if (header === undefined || header.length < 7 || header.slice(0, 7).toLowerCase() !== 'bearer ') return false;
    const given = Buffer.from(header.slice(7));
    // Every token is compared (no early exit), each in constant time for its length.
    let ok = false;
    for (const want of this.list) if (given.length === want.length && timingSafeEqual(given, want)) ok = true;
    return ok;
  }
}
