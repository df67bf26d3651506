// What every API body must be besides valid JSON, checked in one pass over its text after
// JSON.parse accepted it: JSON.parse keeps the last of a repeated key (so `{"traffic_pct": 1,
// "traffic_pct": 100}` would mean 100 to the proxy and 1 to a gateway or log reader that takes the
// first), turns a number too large for a double into Infinity, and follows nesting as deep as the
// text goes. A pass over the text sees each key as written, each number as written, and the depth,
// without recursion; it allocates one Set per object that has keys.
//
// Refused (each message names what and where, as a path like `pipeline.request[2]`):
// - a key given twice in one object;
// - `__proto__` as a key, and `constructor` holding `prototype` (they reach an object's prototype
//   when the body is merged or spread);
// - a number out of a double's range (1e400);
// - nesting deeper than MAX_JSON_DEPTH.

/** Objects and arrays nested deeper than this are refused (a configuration needs a dozen levels). */
export const MAX_JSON_DEPTH = 100;

interface Level {
  /** The keys seen so far (objects only; null for arrays and key-less objects). */
  keys: Set<string> | null;
  readonly isObject: boolean;
  /** The key (object) or index (array) of the value being read, for the path in messages. */
  at: string | number;
  /** The level is the value of a `constructor` key. */
  readonly underConstructor: boolean;
}

/** `a.b[2].c` for the open levels (the top level is the body itself). */
function pathOf(levels: Level[]): string {
  let out = '';
  for (let i = 0; i < levels.length; i++) {
    const at = levels[i]!.at;
    if (typeof at === 'number') out += `[${at}]`;
    else out += out === '' ? at : `.${at}`;
  }
  return out === '' ? 'the top level' : out;
}

/** The end (exclusive) of the JSON string starting at text[start] (a quote). */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === 0x22) return i + 1; // "
    i += c === 0x5c ? 2 : 1; // a backslash escapes the next character (\uXXXX's hex digits are plain)
  }
}

/**
 * The problem with `text` (valid JSON, JSON.parse accepted it), as a message; null when there is
 * none. Key paths in messages are cut at 200 characters.
 */
export function jsonBodyProblem(text: string): string | null {
  const levels: Level[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length;) {
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) { // { [
      if (levels.length === MAX_JSON_DEPTH) return `nested deeper than ${MAX_JSON_DEPTH} levels at ${pathOf(levels).slice(0, 200)}`;
      const parent = levels.length === 0 ? null : levels[levels.length - 1]!;
      levels.push({ keys: null, isObject: c === 0x7b, at: c === 0x7b ? '' : 0, underConstructor: parent !== null && parent.at === 'constructor' });
      expectKey = c === 0x7b;
      i++;
    } else if (c === 0x7d || c === 0x5d) { // } ]
      levels.pop();
      expectKey = false;
      i++;
    } else if (c === 0x2c) { // ,
      const top = levels[levels.length - 1]!;
      if (top.isObject) expectKey = true;
      else top.at = (top.at as number) + 1;
      i++;
    } else if (c === 0x22) { // "
      const end = stringEnd(text, i);
      if (expectKey) {
        const top = levels[levels.length - 1]!;
        const key = JSON.parse(text.slice(i, end)) as string;
        if (key === '__proto__') return 'key "__proto__" is not allowed';
        if (key === 'prototype' && top.underConstructor) return 'key "constructor" holding "prototype" is not allowed';
        top.keys ??= new Set();
        if (top.keys.has(key)) {
          top.at = key;
          return `key ${JSON.stringify(key.slice(0, 100))} is given twice in one object, at ${pathOf(levels).slice(0, 200)}`;
        }
        top.keys.add(key);
        top.at = key;
        expectKey = false;
      }
      i = end;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) { // a number
      let end = i + 1;
      for (; end < text.length; end++) {
        const d = text.charCodeAt(end);
        if (!((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d)) break;
      }
      const literal = text.slice(i, end);
      if (!Number.isFinite(Number(literal))) {
        return `number ${literal.slice(0, 40)} is out of range (at most about 1.8e308), at ${pathOf(levels).slice(0, 200)}`;
      }
      i = end;
    } else {
      i++; // whitespace, ':', true, false, null
    }
  }
  return null;
}
