// The optional statistical judge (docs/canary.md, in the manner of Kayenta): is the candidate
// significantly worse than the baseline, or could the difference be noise?
// - errors: one-sided two-proportion test, H1: candidate error rate > baseline's — Fisher's exact test
//   (hypergeometric tail) while the errors of both sides number at most FISHER_MAX_ERRORS, the pooled
//   z-test beyond (where its normal approximation holds; at low counts it is anti-conservative: a
//   simulated 4.4 % false-positive rate at a nominal 2 %);
// - latency: one-sided Mann-Whitney U test, H1: candidate latencies stochastically larger, computed
//   from the two windows' histogram buckets (ranks by bucket, ties averaged, normal approximation
//   with tie correction and continuity correction) — no raw samples are kept.

/** Standard normal upper tail, 1 − Φ(z) (erfc by W. J. Cody's rational approximation via Numerical
 *  Recipes' erfcc: fractional error below 1.2e-7 everywhere). */
export function normalUpperTail(z: number): number {
  const x = z / Math.SQRT2;
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const y = t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  const erfc = x >= 0 ? y : 2 - y;
  return erfc / 2;
}

export interface TestResult {
  /** One-sided p-value for "candidate worse"; 1 when there is nothing to test. */
  p: number;
  z: number;
}

/** Past this many errors (both sides together) the z-test replaces Fisher's exact test. */
export const FISHER_MAX_ERRORS = 5000;

const LANCZOS = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
  12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];

/** ln Γ(x) for x > 0 (Lanczos, g = 7). */
export function logGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  x -= 1;
  let a = LANCZOS[0];
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += LANCZOS[i] / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

function logChoose(n: number, k: number): number {
  return logGamma(n + 1) - logGamma(k + 1) - logGamma(n - k + 1);
}

/** One-sided Fisher exact test: P(X ≥ candidateErrors), X hypergeometric (the errors' split). */
export function fisherWorse(candidateErrors: number, candidateN: number, baselineErrors: number, baselineN: number): number {
  const n = candidateN + baselineN;
  const k = candidateErrors + baselineErrors;
  const hi = Math.min(k, candidateN);
  const denom = logChoose(n, candidateN);
  let p = 0;
  for (let x = candidateErrors; x <= hi; x++) p += Math.exp(logChoose(k, x) + logChoose(n - k, candidateN - x) - denom);
  return Math.min(1, p);
}

/** The error-rate test the judge uses: Fisher's exact test at low counts, the z-test beyond. */
export function errorRateWorse(candidateErrors: number, candidateN: number, baselineErrors: number, baselineN: number): TestResult {
  const z = twoProportionWorse(candidateErrors, candidateN, baselineErrors, baselineN);
  if (candidateN === 0 || baselineN === 0 || candidateErrors + baselineErrors === 0) return { p: 1, z: z.z };
  if (candidateErrors + baselineErrors > FISHER_MAX_ERRORS) return z;
  return { p: fisherWorse(candidateErrors, candidateN, baselineErrors, baselineN), z: z.z };
}

export function twoProportionWorse(candidateErrors: number, candidateN: number, baselineErrors: number, baselineN: number): TestResult {
  if (candidateN === 0 || baselineN === 0) return { p: 1, z: 0 };
  const pc = candidateErrors / candidateN;
  const pb = baselineErrors / baselineN;
  const pooled = (candidateErrors + baselineErrors) / (candidateN + baselineN);
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / candidateN + 1 / baselineN));
  if (se === 0) return { p: 1, z: 0 }; // no errors at all, or all errors on both sides: no difference to find
  const z = (pc - pb) / se;
  return { p: normalUpperTail(z), z };
}

/** `candidate` and `baseline`: [value, count] buckets ascending by value. */
export function mannWhitneyWorse(candidate: ReadonlyArray<readonly [number, number]>, baseline: ReadonlyArray<readonly [number, number]>): TestResult {
  let nc = 0;
  let nb = 0;
  for (const [, c] of candidate) nc += c;
  for (const [, c] of baseline) nb += c;
  if (nc === 0 || nb === 0) return { p: 1, z: 0 };
  const n = nc + nb;
  // Walk both bucket lists in value order; each distinct value is one tie group.
  let i = 0;
  let j = 0;
  let rank = 0; // ranks used so far
  let rc = 0; // rank sum of the candidate
  let tieTerm = 0; // Σ (t³ − t)
  while (i < candidate.length || j < baseline.length) {
    const vc = i < candidate.length ? candidate[i][0] : Infinity;
    const vb = j < baseline.length ? baseline[j][0] : Infinity;
    const v = Math.min(vc, vb);
    const cc = vc === v ? candidate[i++][1] : 0;
    const cb = vb === v ? baseline[j++][1] : 0;
    const t = cc + cb;
    const avgRank = rank + (t + 1) / 2;
    rc += cc * avgRank;
    rank += t;
    tieTerm += t * t * t - t;
  }
  const u = rc - (nc * (nc + 1)) / 2;
  const mean = (nc * nb) / 2;
  const variance = ((nc * nb) / 12) * ((n + 1) - tieTerm / (n * (n - 1)));
  if (!(variance > 0)) return { p: 1, z: 0 }; // every value equal: nothing to tell apart
  const z = (u - mean - 0.5) / Math.sqrt(variance);
  return { p: normalUpperTail(z), z };
}
