// Notices every kind of save of the configuration file. fs.watch on the file itself follows its
// inode, and most saves replace the inode: an editor or `sed -i` writes a new file and renames it
// over the old one, and a Kubernetes ConfigMap volume swaps a `..data` symlink to a new directory
// (the file is `proxy.yaml -> ..data/proxy.yaml`). After the first such save a file watch sees
// nothing more. So the directory is watched instead, for the names the file's path goes through:
// the file's own name and, when it is a symlink with a relative target, the first name of that
// target (`..data`). When the file resolves into another directory (a symlink to elsewhere), that
// directory is watched too, and the set is worked out again after every change, since a swap
// moves the target. Events are debounced: a save is several events.
import { watch, readlinkSync, realpathSync, lstatSync, type FSWatcher } from 'node:fs';
import { basename, dirname, isAbsolute, resolve, sep } from 'node:path';

export interface ConfigWatchOptions {
  /** Quiet time after the last event before onChange runs (a save is a burst of events). */
  debounceMs?: number;
  /** A directory could not be watched (removed, permissions): saves there go unseen. */
  onError?: (dir: string, err: Error) => void;
}

export class ConfigFileWatcher {
  private readonly file: string;
  private readonly onChange: () => void;
  private readonly debounceMs: number;
  private readonly onError: (dir: string, err: Error) => void;
  /** Watched directory → the entry names in it that lead to the file. */
  private readonly watched = new Map<string, { watcher: FSWatcher; names: Set<string> }>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(file: string, onChange: () => void, opts: ConfigWatchOptions = {}) {
    this.file = resolve(file);
    this.onChange = onChange;
    this.debounceMs = opts.debounceMs ?? 200;
    this.onError = opts.onError ?? (() => undefined);
    this.arm();
  }

  /** The directories to watch and, in each, the names that lead to the file. */
  private targets(): Map<string, Set<string>> {
    const dir = dirname(this.file);
    const names = new Set([basename(this.file)]);
    const out = new Map([[dir, names]]);
    try {
      if (lstatSync(this.file).isSymbolicLink()) {
        const target = readlinkSync(this.file);
        if (!isAbsolute(target)) {
          const head = target.split(/[\\/]/).find((part) => part !== '' && part !== '.');
          if (head !== undefined && head !== '..') names.add(head);
        }
        const real = realpathSync(this.file);
        const realDir = dirname(real);
        // Inside the file's own directory (a ConfigMap's timestamped directory), the names above
        // already see the swap; that directory itself is deleted by the next one.
        if (realDir !== dir && !realDir.startsWith(dir + sep)) out.set(realDir, new Set([basename(real)]));
      }
    } catch {
      // The file is missing for now (a save in progress): its directory is still watched.
    }
    return out;
  }

  private arm(): void {
    const want = this.targets();
    for (const [dir, w] of this.watched) {
      if (!want.has(dir)) {
        w.watcher.close();
        this.watched.delete(dir);
      }
    }
    for (const [dir, names] of want) {
      const have = this.watched.get(dir);
      if (have !== undefined) {
        have.names = names;
        continue;
      }
      try {
        const watcher = watch(dir, { persistent: false }, (_event, name) => {
          const w = this.watched.get(dir);
          if (w !== undefined && (name === null || w.names.has(name.toString()))) this.schedule();
        });
        watcher.on('error', (err) => {
          watcher.close();
          if (this.watched.get(dir)?.watcher === watcher) this.watched.delete(dir);
          this.onError(dir, err);
        });
        this.watched.set(dir, { watcher, names });
      } catch (err) {
        this.onError(dir, err as Error);
      }
    }
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.closed) return;
      this.arm();
      this.onChange();
    }, this.debounceMs);
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    for (const w of this.watched.values()) w.watcher.close();
    this.watched.clear();
  }
}
