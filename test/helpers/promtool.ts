// Test helper: `promtool check metrics` (Debian's prometheus package, which .ci/run installs) over
// a /metrics text; its findings, less those `allowed` matches.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

/** The SPEC's step histogram is in µs (`_us`): promtool's unit lint flags it, and only it. */
export const SPEC_UNIT_LINT = /proxy_step_latency_us.*(abbreviated|units)|proxy_step_latency_us.*non-base/i;

/** promtool's findings on `text` that `allowed` does not match; null when promtool is not installed (refused under CI). */
export function promtoolFindings(text: string, allowed: RegExp = SPEC_UNIT_LINT): string[] | null {
  const promtool = ['/usr/bin/promtool', '/bin/promtool'].find((p) => existsSync(p));
  if (promtool === undefined) {
    assert.ok(!process.env.CI, 'promtool must be installed in CI (.ci/run installs Debian prometheus)');
    return null;
  }
  const out = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return `${out.stdout}${out.stderr}`.split('\n').filter((l) => l.trim() !== '' && !allowed.test(l));
}
