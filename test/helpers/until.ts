// Waiting for a condition in a test: polls `check` until it holds, failing with `what` after `ms`.
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 15_000, stepMs = 20): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
