// Argument parsing for command documents: mongod-style FailedToParse /
// TypeMismatch errors for bad shapes.
import type { Document } from 'bson';
import { fail } from '../errors.ts';
import { asNumber, bsonTypeName, isPlainObject } from '../values.ts';

export function commandName(cmd: Document): string {
  return Object.keys(cmd)[0];
}

/** The collection named by the command's first field. */
export function collectionArg(cmd: Document): string {
  const name = commandName(cmd);
  const v = cmd[name];
  if (typeof v !== 'string') fail('TypeMismatch', `collection name has invalid type ${bsonTypeName(v)}`);
  checkCollectionName(v, String(cmd.$db ?? ''));
  return v;
}

export function checkCollectionName(v: string, db: string): void {
  if (v.length === 0 || v.includes('\0') || v.startsWith('.') || v.includes('$'))
    fail('InvalidNamespace', `Invalid namespace specified '${db}.${v}'`);
}

export function checkDbName(db: string): void {
  if (!db || /[/\\. "$\0]/.test(db)) fail('InvalidNamespace', `Invalid database name: '${db}'`);
}

function wrongType(cmd: string, field: string, v: unknown, expected: string): never {
  fail('TypeMismatch', `BSON field '${cmd}.${field}' is the wrong type '${bsonTypeName(v)}', expected type '${expected}'`);
}

export function docArg(cmd: Document, field: string, required = false): Document | undefined {
  const v = cmd[field];
  if (v === undefined || (v === null && !required)) {
    if (required) fail('FailedToParse', `BSON field '${commandName(cmd)}.${field}' is missing but a required field`);
    return undefined;
  }
  if (!isPlainObject(v)) wrongType(commandName(cmd), field, v, 'object');
  return v;
}

export function arrayArg(cmd: Document, field: string, required = false): unknown[] | undefined {
  const v = cmd[field];
  if (v === undefined) {
    if (required) fail('FailedToParse', `BSON field '${commandName(cmd)}.${field}' is missing but a required field`);
    return undefined;
  }
  if (!Array.isArray(v)) wrongType(commandName(cmd), field, v, 'array');
  return v;
}

export function docArrayArg(cmd: Document, field: string, required = false): Document[] | undefined {
  const arr = arrayArg(cmd, field, required);
  if (!arr) return undefined;
  arr.forEach((d, i) => {
    if (!isPlainObject(d)) wrongType(commandName(cmd), `${field}.${i}`, d, 'object');
  });
  return arr as Document[];
}

export function numArg(cmd: Document, field: string): number | undefined {
  const v = cmd[field];
  if (v === undefined || v === null) return undefined;
  const n = asNumber(v);
  if (n === undefined || Number.isNaN(n)) wrongType(commandName(cmd), field, v, 'long');
  return n;
}

export function nonNegArg(cmd: Document, field: string): number | undefined {
  const n = numArg(cmd, field);
  if (n !== undefined && n < 0) fail('BadValue', `${field} must be non-negative, but received: ${n}`);
  return n === undefined ? undefined : Math.trunc(n);
}

export function boolArg(cmd: Document, field: string): boolean | undefined {
  const v = cmd[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'boolean') return v;
  const n = asNumber(v);
  if (n !== undefined) return n !== 0;
  wrongType(commandName(cmd), field, v, 'bool');
}

export function strArg(cmd: Document, field: string, required = false): string | undefined {
  const v = cmd[field];
  if (v === undefined) {
    if (required) fail('FailedToParse', `BSON field '${commandName(cmd)}.${field}' is missing but a required field`);
    return undefined;
  }
  if (typeof v !== 'string') wrongType(commandName(cmd), field, v, 'string');
  return v;
}
