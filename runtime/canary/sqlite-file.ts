// The canary's SQLite files (canary.db, the notification outbox): opened with a message naming the
// file and what to do, and watched while the proxy runs. Watched means: the file's device and
// inode are checked before each write, every checkMs and at close. A file deleted or replaced
// under the proxy (`rm -rf data/`, a restore over it) would otherwise go on being written through
// the open handle, into a file nobody can open again, and its contents would be gone at the next
// restart with nothing said. The open handle still holds everything, so it is written to a new
// file at the path (a replacing file is moved aside first, not overwritten) and logged at `error`
// once.
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Log } from '../log/index.ts';

/**
 * An error opening one of the canary's SQLite files, naming the file and what to do
 * (better-sqlite3 says "file is not a database" or "database is locked" without the file).
 */
export function sqliteOpenError(what: string, path: string, err: unknown, key: string): Error {
  const e = err as NodeJS.ErrnoException;
  const todo = e.code === 'SQLITE_NOTADB' || e.code === 'SQLITE_CORRUPT'
    ? 'it is not a readable SQLite database: move it aside (it is then created empty) or restore it from a backup'
    : e.code === 'SQLITE_BUSY' ? `another process holds it (one proxy per ${key})`
    : e.code === 'EEXIST' || e.code === 'ENOTDIR' ? `its directory (from ${key}) is a file, not a directory` : `check ${key}`;
  return new Error(`cannot open ${what} ${path}: ${e.message}; ${todo}`, { cause: err });
}

/** What a file is, for its messages. */
export interface SqliteFileText {
  /** "the canary store". */
  what: string;
  /** The configuration key(s) that place it, in an error opening it: "canary.data_dir". */
  key: string;
  /** Where it is, in the messages of a watched file (what to stop the proxy before touching, what to make writable): "canary.data_dir". */
  place: string;
  /** What it holds: "the canaries, their history, samples and promotions". */
  holds: string;
  /** What a lost file loses: "every canary". */
  lost: string;
}

export interface SqliteFileSettings extends SqliteFileText {
  /** WAL with synchronous FULL or NORMAL. */
  synchronous: 'FULL' | 'NORMAL';
  /** Its tables (CREATE … IF NOT EXISTS). */
  schema: string;
}

/** Opens (creating if missing, with its directory) a SQLite file in WAL mode with its tables; ":memory:" is kept in memory. */
export function openSqlite(path: string, s: SqliteFileSettings): Database.Database {
  let db: Database.Database | null = null;
  try {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${s.synchronous}`);
    db.exec(s.schema);
    return db;
  } catch (err) {
    db?.close();
    throw sqliteOpenError(s.what, path, err, s.key);
  }
}

/**
 * A file's identity: device and inode (bigint: inode numbers past 2^53 exist); null: no file there;
 * undefined: cannot tell (stat failed otherwise, e.g. EACCES) — nothing is done about that.
 */
function identityOf(path: string): string | null | undefined {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? null : undefined;
  }
}

export interface WatchOptions {
  /** Where a file deleted or replaced under the proxy is reported (absent: not reported, still re-persisted). */
  log?: Pick<Log, 'info' | 'error'>;
  /** How often the file is checked besides before each write (ms); 0: only before writes. */
  checkMs?: number;
  /** The clock (ms since the epoch) naming a replaced file moved aside; tests move it. */
  now?: () => number;
}

/**
 * One watched SQLite file: `db` is its open handle (a new one after a re-persist: `reopened` is
 * called with it, to prepare the statements again). The owner calls check() before each write and
 * close() at stop. ":memory:" is not watched.
 */
export class WatchedSqlite {
  readonly path: string;
  private handle: Database.Database;
  private readonly settings: SqliteFileSettings;
  private readonly reopened: (db: Database.Database) => void;
  /** The device and inode of the file `handle` has open. */
  private identity: string | null | undefined;
  private readonly log: Pick<Log, 'info' | 'error'> | null;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | null;
  /** A re-persist failed and was reported; retried at each check, reported again only once it works. */
  private failing = false;
  private closed = false;

  constructor(path: string, settings: SqliteFileSettings, reopened: (db: Database.Database) => void, opts: WatchOptions = {}) {
    this.path = path;
    this.settings = settings;
    this.reopened = reopened;
    this.log = opts.log ?? null;
    this.now = opts.now ?? Date.now;
    this.handle = openSqlite(path, settings);
    reopened(this.handle);
    const memory = path === ':memory:';
    this.identity = memory ? undefined : identityOf(path);
    const every = memory ? 0 : opts.checkMs ?? 10_000;
    this.timer = every > 0 ? setInterval(() => this.check(), every) : null;
    this.timer?.unref();
  }

  get db(): Database.Database {
    return this.handle;
  }

  /**
   * Whether the file is still the one open; if not (deleted, or replaced by another file), writes
   * everything the open handle holds to a new file at the path and switches to it.
   */
  check(): void {
    if (this.closed || this.identity === undefined) return;
    const now = identityOf(this.path);
    if (now === undefined || now === this.identity) return;
    const how = now === null ? 'deleted' : 'replaced';
    const { what, place, holds, lost } = this.settings;
    try {
      const movedAside = this.repersist(now !== null);
      this.log?.error(`${what} ${this.path} was ${how} while the proxy runs: ${holds} the proxy holds were written to a new ${this.path}, so ` +
        'nothing is lost' + (movedAside === null ? '' : ` (the file found there is kept as ${movedAside})`) + `. Stop the proxy before deleting, ` +
        `moving or restoring ${place}`, { file: this.path, how, moved_aside: movedAside });
      this.failing = false;
    } catch (err) {
      if (!this.failing) {
        this.log?.error(`${what} ${this.path} was ${how} while the proxy runs, and writing its state to a new file failed (retried every check): ` +
          `${lost} is lost at the next restart unless this is fixed while the proxy runs — make ${place} writable again`,
        { file: this.path, how, error: (err as Error).message });
      }
      this.failing = true;
    }
  }

  /**
   * Writes the open database to `<path>.recovering` (VACUUM INTO: a consistent copy), moves a file
   * now at `path` aside if `replaced`, closes the old handle and opens the copy as `path`. The WAL
   * is checkpointed and truncated first: the old handle's -wal file keeps its name, and a new
   * database must not find frames of the old one in it. Returns where a replacing file went.
   */
  private repersist(replaced: boolean): string | null {
    const tmp = `${this.path}.recovering`;
    rmSync(tmp, { force: true });
    mkdirSync(dirname(this.path), { recursive: true });
    this.handle.pragma('wal_checkpoint(TRUNCATE)');
    this.handle.prepare('VACUUM INTO ?').run(tmp);
    let aside: string | null = null;
    if (replaced) {
      aside = `${this.path}.replaced-${new Date(this.now()).toISOString().replace(/:/g, '')}`;
      renameSync(this.path, aside);
    }
    this.handle.close();
    try {
      renameSync(tmp, this.path);
      this.handle = openSqlite(this.path, this.settings);
    } catch (err) {
      // The copy holds everything: run on it (the next check, finding no file of ours, tries again).
      this.handle = openSqlite(existsSync(this.path) && !existsSync(tmp) ? this.path : tmp, this.settings);
      this.reopened(this.handle);
      this.identity = `the copy at ${tmp}`;
      throw err;
    }
    this.reopened(this.handle);
    this.identity = identityOf(this.path);
    return aside;
  }

  /** Checks the file a last time (a graceful stop re-persists a deleted file), then closes it. */
  close(): void {
    if (this.closed) return;
    if (this.timer !== null) clearInterval(this.timer);
    this.check();
    this.closed = true;
    this.handle.close();
  }
}
