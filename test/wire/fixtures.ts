// Loads the captured client frames in test/fixtures/wire (hex of exact bytes on the wire).
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('../fixtures/wire/', import.meta.url));

export interface FixtureEntry {
  file: string;
  opcode: 'OP_MSG' | 'OP_QUERY';
  compressor: string | null;
  flags?: number;
  command: string;
  db?: string;
  ns?: string;
  sequences?: string[];
}

export function fixtureIndex(): FixtureEntry[] {
  const out: FixtureEntry[] = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith('-index.json')).sort()) {
    out.push(...(JSON.parse(readFileSync(dir + f, 'utf8')) as FixtureEntry[]));
  }
  return out;
}

export function fixtureFrame(file: string): Buffer {
  return Buffer.from(readFileSync(dir + file, 'utf8').trim(), 'hex');
}
