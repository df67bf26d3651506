// `proxy user add <name> [--db <db>] [--iterations <n>] [--format json|yaml|toml]`: reads a
// password (prompted twice without echo on a terminal, else the first line of standard input) and
// prints the `auth.users` entry for it — a SCRAM-SHA-256 credential, never the password. The
// password is prepared with SASLprep (RFC 4013) as drivers prepare it for SCRAM-SHA-256.
// cac has no two-word commands, so `user` takes the action as its first argument.
import type { CAC } from 'cac';
import { pbkdf2Sync, randomBytes } from 'node:crypto';
import { saslprep } from '@mongodb-js/saslprep';
import { stringify as toYaml } from 'yaml';
import { stringify as toToml } from 'smol-toml';
import { scramKeysFromSaltedPassword } from '../server/index.ts';
import { digitsOption, typedOption } from './argv.ts';

/** mongod's defaults for SCRAM-SHA-256: 15000 iterations, a 28-byte salt. */
export const DEFAULT_ITERATIONS = 15000;
const SALT_BYTES = 28;
const MAX_PASSWORD_BYTES = 1024;
const FORMATS: readonly string[] = ['json', 'yaml', 'toml'];

export interface UserEntry {
  name: string;
  db: string;
  iterations: number;
  salt: string;
  stored_key: string;
  server_key: string;
}

export class UserCommandError extends Error {}

/** The `auth.users` entry for `password` (salt random unless given). */
export function scramUserEntry(name: string, db: string, password: string, iterations = DEFAULT_ITERATIONS, salt = randomBytes(SALT_BYTES)): UserEntry {
  let prepared: string;
  try {
    prepared = saslprep(password);
  } catch (err) {
    throw new UserCommandError(`the password is not allowed by SASLprep (RFC 4013): ${(err as Error).message}`);
  }
  const salted = pbkdf2Sync(prepared, salt, iterations, 32, 'sha256');
  const k = scramKeysFromSaltedPassword(salted);
  return { name, db, iterations, salt: salt.toString('base64'), stored_key: k.storedKey.toString('base64'), server_key: k.serverKey.toString('base64') };
}

/** The entry as a fragment of a config file in `format`. */
export function renderEntry(e: UserEntry, format: string): string {
  if (format === 'json') return `${JSON.stringify(e, null, 2)}\n`;
  if (format === 'yaml') return toYaml({ auth: { users: [e] } });
  if (format === 'toml') return `${toToml({ auth: { users: [e] } }).trim()}\n`;
  throw new UserCommandError(`unknown --format "${format}" (expected json, yaml or toml)`);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of process.stdin) {
    chunks.push(c as Buffer);
    n += (c as Buffer).length;
    if (n > MAX_PASSWORD_BYTES * 4) break;
  }
  const text = Buffer.concat(chunks).toString('utf8');
  const nl = text.search(/\r?\n/);
  return nl < 0 ? text : text.slice(0, nl);
}

/** One line from the terminal with echo off. */
function promptHidden(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const stdin = process.stdin;
    process.stderr.write(question);
    stdin.setRawMode(true);
    stdin.resume();
    let line = '';
    const onData = (buf: Buffer) => {
      for (const ch of buf.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return done(null);
        if (ch === '\u0003') return done(new UserCommandError('interrupted'));
        if (ch === '\u007f' || ch === '\b') line = line.slice(0, -1);
        else line += ch;
      }
    };
    const done = (err: Error | null) => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
      if (err !== null) reject(err);
      else resolve(line);
    };
    stdin.on('data', onData);
  });
}

async function readPassword(name: string): Promise<string> {
  if (!process.stdin.isTTY) return readStdin();
  const first = await promptHidden(`Password for ${name}: `);
  const again = await promptHidden('Repeat it: ');
  if (first !== again) throw new UserCommandError('the passwords differ');
  return first;
}

export function registerUser(cli: CAC): void {
  cli.command('user <action> [name]', 'Client users: `user add <name>` prints the auth.users entry (a SCRAM-SHA-256 credential) for a password ' +
    'read from standard input or a prompt')
    .option('--db <db>', 'authentication database (the client\'s authSource)', { default: 'admin' })
    .option('--iterations <n>', 'PBKDF2 iterations (at least 4096)', { default: DEFAULT_ITERATIONS })
    .option('--format <format>', 'json (the entry), yaml or toml (an auth.users fragment)', { default: 'json' })
    .action(async (action: string, name: string | undefined) => {
      try {
        if (action !== 'add') throw new UserCommandError(`unknown user action "${action}" (expected: add)`);
        const userName = typedName() ?? name;
        if (userName === undefined || String(userName).length === 0) throw new UserCommandError('missing user name: proxy user add <name>');
        const db = typedOption('db') ?? 'admin';
        const format = typedOption('format') ?? 'json';
        const iter = digitsOption('iterations', typedOption('iterations'));
        if ('problem' in iter) throw new UserCommandError(iter.problem);
        const iterations = iter.value ?? DEFAULT_ITERATIONS;
        if (iterations < 4096) throw new UserCommandError(`--iterations must be an integer >= 4096, got "${iterations}"`);
        if (db.length === 0) throw new UserCommandError('--db must not be empty');
        if (!FORMATS.includes(format)) throw new UserCommandError(`unknown --format "${format}" (expected json, yaml or toml)`);
        const password = await readPassword(String(userName));
        if (password.length === 0) throw new UserCommandError('empty password');
        if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES) throw new UserCommandError(`the password is longer than ${MAX_PASSWORD_BYTES} bytes`);
        process.stdout.write(renderEntry(scramUserEntry(String(userName), db, password, iterations), format));
      } catch (err) {
        if (!(err instanceof UserCommandError)) throw err;
        process.stderr.write(`proxy user: ${err.message}\n`);
        process.exit(2);
      }
    });
}

/** The name exactly as typed (cac turns "007" into 7). */
function typedName(): string | undefined {
  const i = process.argv.indexOf('add');
  const next = i < 0 ? undefined : process.argv[i + 1];
  return next === undefined || next.startsWith('--') ? undefined : next;
}
