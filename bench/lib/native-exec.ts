// Plugins (and the processes they are compared with) run as a container runtime runs them, through
// crates/netplug-shim/examples/exec-server.rs:
// a vfork-style spawn timed natively from spawn to exit, instead of Node's spawn, which costs
// ~3 ms more per process on this VM and would add the benchmark's own cost to every variant.
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

const ROOT = new URL('../../', import.meta.url).pathname;
const EXEC_SERVER = `${ROOT}target/release/examples/exec-server`;
export const LAUNCH_TIMER = `${ROOT}target/release/examples/launch-timer`;

let built = false;

/** Builds the native helpers of the benchmarks (exec-server, and launch-timer for bench:agent), once per process. */
export function buildNativeHelpers(): void {
  if (built) return;
  console.error('building the native spawners (cargo build --release --example exec-server --example launch-timer)');
  execFileSync(
    'sh',
    ['scripts/cargo.sh', 'build', '--quiet', '--release', '-p', 'netplug-shim', '--example', 'exec-server', '--example', 'launch-timer'],
    { cwd: ROOT, stdio: 'inherit' },
  );
  built = true;
}

/** One process run to its exit, timed natively from spawn to exit. */
export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** The spawn, in milliseconds on the monotonic clock (which an agent's own timings share). */
  startMs: number;
}

interface Reply {
  id: number;
  status?: number | null;
  stdout?: string;
  stderr?: string;
  ns?: number;
  start_ns?: number;
  error?: string;
}

export interface NativeExec {
  /** Runs `executable` to its exit; resolves whatever the exit status, rejects if it could not be spawned. */
  run(executable: string, env: Record<string, string>, input: string, args?: readonly string[]): Promise<Run>;
  close(): Promise<void>;
}

export function startNativeExec(): NativeExec {
  const server: ChildProcessWithoutNullStreams = spawn(EXEC_SERVER, [], { stdio: ['pipe', 'pipe', 'pipe'] });
  const pending = new Map<number, { resolve: (reply: Reply) => void; reject: (err: Error) => void }>();
  let nextId = 1;
  let stderr = '';
  server.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk).slice(-2000)));
  createInterface({ input: server.stdout }).on('line', (line) => {
    const reply = JSON.parse(line) as Reply;
    pending.get(reply.id)?.resolve(reply);
    pending.delete(reply.id);
  });
  server.on('exit', (code) => {
    for (const { reject } of pending.values()) reject(new Error(`exec-server exited ${code}: ${stderr}`));
    pending.clear();
  });
  return {
    run: async (executable, env, input, args = []) => {
      const id = nextId++;
      const reply = await new Promise<Reply>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        server.stdin.write(`${JSON.stringify({ id, exe: executable, args, env, stdin: input })}\n`);
      });
      if (reply.error !== undefined) throw new Error(reply.error);
      return {
        status: reply.status ?? null,
        stdout: reply.stdout ?? '',
        stderr: reply.stderr ?? '',
        ms: (reply.ns ?? 0) / 1e6,
        startMs: (reply.start_ns ?? 0) / 1e6,
      };
    },
    close: () =>
      new Promise((resolve) => {
        if (server.exitCode !== null) return resolve();
        server.once('exit', () => resolve());
        server.stdin.end();
      }),
  };
}
