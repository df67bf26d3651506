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

export const int = (min: number, max: number | undefined, desc: string) => {
  const base =
    max === undefined
      ? v.pipe(v.number(), v.integer(), v.minValue(min), v.description(desc))
      : v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max), v.description(desc));
  return expects(base, max === undefined ? `integer >= ${min}` : `integer ${min}..${max}`);
};
