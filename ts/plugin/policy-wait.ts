// The policy setup timeout: after networking a pod, ADD waits until the policy agent reports the
// pod's policy programmed, by the status file it writes for the endpoint in `endpoint_status_dir`
// (named `<orchestrator> <url-escaped namespace/pod> <interface>`), for up to
// `policy_setup_timeout_seconds`. A directory watch sees the file appear; a stat every
// POLL_INTERVAL_MS covers a directory that does not exist yet or a watch that cannot be had. At the
// timeout ADD succeeds anyway and says so in the log.
import type { Logger } from '../log/logger.ts';

const POLL_INTERVAL_MS = 100;
/** setTimeout's longest delay (2^31 - 1 ms, about 24.8 days): a longer one fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Calls `fire` after `ms`, however long: timers of at most MAX_TIMER_MS each, one after another. */
export function setLongTimeout(fire: () => void, ms: number): { clear(): void } {
  let timer: NodeJS.Timeout;
  const wait = (remaining: number) => {
    timer = setTimeout(() => (remaining > MAX_TIMER_MS ? wait(remaining - MAX_TIMER_MS) : fire()), Math.min(remaining, MAX_TIMER_MS));
  };
  wait(Math.max(0, ms));
  return { clear: () => clearTimeout(timer) };
}

/** The status file's name, as the policy agent writes it (Go's url.PathEscape of namespace/pod). */
export function statusFileName(orchestrator: string, namespace: string, pod: string, endpoint: string): string {
  const urlEscape = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `${orchestrator} ${urlEscape(`${namespace}/${pod}`)} ${urlEscape(endpoint)}`;
}

export async function waitForPolicy(directory: string, file: string, timeoutSeconds: number, log: Logger): Promise<boolean> {
  const { existsSync, watch } = process.getBuiltinModule('node:fs');
  const { join } = process.getBuiltinModule('node:path');
  const path = join(directory, file);
  const started = Date.now();
  const ready = await new Promise<boolean>((resolve) => {
    let watcher: { close(): void } | undefined;
    const finish = (found: boolean) => {
      clearInterval(poll);
      timer.clear();
      watcher?.close();
      resolve(found);
    };
    const check = () => existsSync(path) && finish(true);
    const poll = setInterval(check, POLL_INTERVAL_MS);
    const timer = setLongTimeout(() => finish(false), timeoutSeconds * 1000);
    try {
      const watching = watch(directory, (_, name) => name === file && check());
      // A watch that breaks (its directory removed) leaves the stat poll in charge.
      watching.on('error', () => watching.close());
      watcher = watching;
    } catch {
      // No directory yet: the stat poll notices the file once it has one.
    }
    check();
  });
  if (ready) log.debug('policy programmed', { file: path, waitedMs: Date.now() - started });
  else
    log.error(`the policy agent did not report the pod's policy programmed within ${timeoutSeconds} s (no ${path}); networking it anyway`);
  return ready;
}
