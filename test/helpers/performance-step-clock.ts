// Imported first by a test that counts clock reads by wrapping performance.now(): the step clock
// (runtime/step-clock.ts, chosen when it is first imported) then reads performance.now() too, so
// the count includes step boundaries and sub-operations.
process.env.PROXY_STEP_CLOCK = 'performance';
