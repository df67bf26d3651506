// Test helper: the real `proxy serve` command (bin/proxy.mjs) in a child process, for what only a
// process shows — workers (node:cluster), signals, exit codes. spawnServe resolves once the ready
// banner (the connection string) is printed; stop() sends a signal and waits for the exit. One
// process (`--workers 1`, not the command's default "auto") unless the arguments choose workers.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

const BIN = join(process.cwd(), 'bin/proxy.mjs');

export interface Served {
  readonly child: ChildProcess;
  /** stdout so far (the ready banner). */
  readonly out: () => string;
  /** stderr so far (the JSON log lines). */
  readonly err: () => string;
  /** Sends `signal` (SIGTERM by default) and resolves with the exit code once the process ended. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `proxy serve …args` (with `--workers 1` when args has no --workers); rejects with its output
 * when it exits before it is ready (or after `ms`). `spawned` sees the process as soon as it exists
 * (to act on its workers while it starts).
 */
export async function spawnServe(args: readonly string[], ms = 120_000, spawned?: (child: ChildProcess) => void): Promise<Served> {
  const argv = args.includes('--workers') ? args : [...args, '--workers', '1'];
  const child = spawn(process.execPath, [BIN, 'serve', ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  spawned?.(child);
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => { err += d; });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const served: Served = {
    child, out: () => out, err: () => err,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not ready within ${ms} ms: ${out}\n${err}`)), ms);
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('mongodb://')) { clearTimeout(timer); resolve(); }
      });
      void exited.then((code) => { clearTimeout(timer); reject(new Error(`exited ${code} before ready: ${out}\n${err}`)); });
    });
  } catch (e) {
    await served.stop('SIGKILL');
    throw e;
  }
  return served;
}
