// The phrase a schema's value is described by, shared by every schema file of the configuration
// (the docs' type column and the "expected …" of validation errors read it, so they agree).
import * as v from 'valibot';

/**
 * A short, human phrase for what a key accepts. Used both for the "type" column of the docs and
 * for the "expected ..." part of validation errors, so the two can never disagree.
 */
export const EXPECTS = Symbol('expects');
export type Expects = { [EXPECTS]?: string };

export function expects<T extends object>(schema: T, phrase: string): T {
  (schema as Expects)[EXPECTS] = phrase;
  return schema;
}

/**
 * The longest delay a Node timer waits (2^31 − 1 ms, about 24.8 days): a longer one fires after
 * 1 ms. The upper bound of every `*_ms` key that sets a timer.
 */
export const MAX_TIMER_MS = 2_147_483_647;

export const int = (min: number, max: number | undefined, desc: string) => {
  const base =
    max === undefined
      ? v.pipe(v.number(), v.integer(), v.minValue(min), v.description(desc))
      : v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max), v.description(desc));
  return expects(base, max === undefined ? `integer >= ${min}` : `integer ${min}..${max}`);
};
