// Reloading from the configuration file: on SIGHUP, and on a save of the file while
// `admin.reload_on_change` is on. One reload per change: a trigger that finds the file, and the
// files it names, as they were at the last reload that applied does nothing (a save that changed
// nothing, the burst of events of one save, a SIGHUP sent after an edit the watch already applied).
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { ConfigError, parseConfigText, readConfigFile, type ConfigFormat, type ProxyConfig } from '../config/index.ts';
import { readRegularFileSync } from '../fs/index.ts';
import type { Log } from '../log/index.ts';
import { ConfigFileWatcher } from './config-watch.ts';

/** What watchReload needs of a running proxy. */
export interface ReloadTarget {
  readonly config: ProxyConfig;
  reload(next: ProxyConfig): Promise<void>;
  readonly pipelines: { modulePath(step: string, name: string, settings: ProxyConfig['steps'][string] | undefined): string };
}

export interface WatchReloadOptions {
  /** Quiet time after a file event before the file is read (default 200 ms). */
  debounceMs?: number;
  /** The file's format when its name does not say it (serve --config-format); absent: by the extension. */
  format?: ConfigFormat;
}

/**
 * What a reload from this text would read: the text, the TLS files it names (re-read by a reload,
 * so a renewed certificate with an unchanged configuration still reloads on SIGHUP) and the size
 * and time of each step's module (a rebuilt plugin likewise).
 */
export function configFingerprint(text: string, config: ProxyConfig, target: ReloadTarget): string {
  const h = createHash('sha256').update(text);
  const tls = config.tls;
  for (const path of tls === undefined ? [] : [tls.cert_file, tls.key_file, tls.ca_file]) {
    if (path === undefined) continue;
    try {
      h.update(`\0tls\0${path}\0`).update(readRegularFileSync(path));
    } catch (err) {
      h.update(`\0tls\0${path}\0${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`);
    }
  }
  for (const id of new Set([...config.pipeline.request, ...config.pipeline.response])) {
    const name = id.startsWith('wasm:') ? id.slice(5) : id;
    let entry: string;
    try {
      const path = target.pipelines.modulePath(`wasm:${name}`, name, config.steps[name] ?? config.steps[`wasm:${name}`]);
      const st = statSync(path);
      entry = `${path}\0${st.size}\0${st.mtimeMs}`;
    } catch (err) {
      entry = (err as Error).message;
    }
    h.update(`\0step\0${name}\0${entry}`);
  }
  return h.digest('hex');
}

/**
 * Reloads from `file` on SIGHUP and, while admin.reload_on_change is on, when the file is saved
 * (written in place, replaced by a rename, or swapped through a symlink as a Kubernetes ConfigMap
 * is). A refused configuration is logged with its reason and the running one stays. Returns a
 * stop function.
 */
export function watchReload(running: ReloadTarget, file: string, log: Log, opts: WatchReloadOptions = {}): () => void {
  /**
   * What the running configuration was last loaded from, and that configuration: a trigger finding
   * the same fingerprint while the proxy still runs that configuration (no reload through the admin
   * API since) has nothing to apply. Null: not known.
   */
  let applied: { fingerprint: string; config: ProxyConfig } | null = null;
  /** Hash of the last text refused by the schema, so one bad save is reported once. */
  let refusedText: string | null = null;
  let chain: Promise<void> = Promise.resolve();
  /** Triggers waiting for the next check: any number of them make one check. */
  let waiting: Set<string> | null = null;

  const check = async (triggers: Set<string>) => {
    const trigger = [...triggers].join(', ');
    const explicit = triggers.has('SIGHUP');
    let text: string;
    try {
      text = await readConfigFile(file);
    } catch (err) {
      log.error('configuration reload refused; the running configuration stays', { trigger, file, error: `cannot read file: ${(err as Error).message}` });
      return;
    }
    const textHash = createHash('sha256').update(text).digest('hex');
    let config: ProxyConfig;
    try {
      config = parseConfigText(text, file, opts.format);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      if (!explicit && textHash === refusedText) return;
      refusedText = textHash;
      log.error('configuration reload refused; the running configuration stays', { trigger, file, error: err.message });
      return;
    }
    refusedText = null;
    const fingerprint = configFingerprint(text, config, running);
    if (applied !== null && fingerprint === applied.fingerprint && running.config === applied.config) {
      if (explicit) log.info('configuration unchanged since the last reload; nothing to apply', { trigger, file });
      return;
    }
    try {
      await running.reload(config);
      applied = { fingerprint, config: running.config };
    } catch (err) {
      log.error('configuration reload refused; the running configuration stays', { trigger, file, error: (err as Error).message });
    }
  };

  const request = (trigger: string) => {
    if (waiting !== null) {
      waiting.add(trigger);
      return;
    }
    const triggers = new Set([trigger]);
    waiting = triggers;
    chain = chain.then(() => {
      waiting = null;
      return check(triggers);
    }).catch((err: Error) => {
      log.error('configuration reload failed', { file, error: err.message });
    });
  };

  // What the proxy runs was loaded from this file when the file still says the same: then a first
  // event that changed nothing applies nothing. (A file edited while the proxy started differs,
  // and the first trigger reloads it.)
  chain = chain.then(async () => {
    try {
      const text = await readConfigFile(file);
      const config = parseConfigText(text, file, opts.format);
      if (isDeepStrictEqual(config, running.config)) applied = { fingerprint: configFingerprint(text, config, running), config: running.config };
    } catch {
      // Unreadable or refused now: the first trigger reports it.
    }
  });

  const onHup = () => request('SIGHUP');
  process.on('SIGHUP', onHup);
  let warned = false;
  const watcher = new ConfigFileWatcher(file, () => {
    if (running.config.admin?.reload_on_change !== false) request('file change');
  }, {
    debounceMs: opts.debounceMs,
    onError: (dir, err) => {
      if (warned || running.config.admin?.reload_on_change === false) return;
      warned = true;
      log.warn('cannot watch the configuration file\'s directory; reload with SIGHUP', { file, dir, error: err.message });
    },
  });
  return () => {
    process.off('SIGHUP', onHup);
    watcher.close();
  };
}
