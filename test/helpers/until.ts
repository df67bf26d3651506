// Waiting for a condition in a test: polls `check` until it holds, failing with `what` after `ms`.
// `what` may be a function, read only on failure (to show state as it was then, e.g. a child's stderr).
export async function until(what: string | (() => string), check: () => boolean | Promise<boolean>, ms = 15_000, stepMs = 20): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
