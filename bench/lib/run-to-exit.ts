// Runs a command to its exit under a deadline, for the benches' tools run in a namespace (iperf3,
// ping, ss, ip): its stdout, or an error with the tail of its stderr.
import { spawn, type ChildProcess } from 'node:child_process';

/**
 * `argv` to its exit, killed after `timeoutMs`; `what` names it in the error. `running`, if given,
 * holds the child while it runs (so that a bench's Ctrl-C handler can kill it).
 */
export function runToExit(argv: string[], what: string, timeoutMs: number, running?: Set<ChildProcess>): Promise<string> {
  return new Promise((resolve, reject) => {
    const [command, ...args] = argv;
    if (!command) throw new Error('runToExit needs a command');
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    running?.add(child);
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      err = (err + text).slice(-4000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running?.delete(child);
      if (code === 0) resolve(out);
      else reject(new Error(`${what}: ${signal ?? `exit ${code}`}: ${err}${out.slice(0, 2000)}`));
    });
  });
}
