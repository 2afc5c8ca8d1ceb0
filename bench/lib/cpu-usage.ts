// CPU time spent by each kind of process over a span, from /proc/<pid>/stat: what a component costs
// a 2-core node while pods start. A process's own time plus that of the children it waited for
// (containerd's includes the CNI plugins it ran), so short-lived plugins are counted through their
// parent. Sampled so that processes started and ended within the span are counted too (a child
// seen alive and then reaped counts twice, own and parent's: rare for a 10 ms plugin at 1 s).
// Read synchronously and once a second: with 100 pods a node has some 400 processes, and reading
// them with promises every 200 ms cost the node a third of a core, the load it was measuring.
// The benchmark's own process is named `bench` (its time includes the kubectl runs it waited for).
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux architecture Node supports

interface Seen {
  comm: string;
  /** At the first sample this process was seen in (0 if it started within the span). */
  first: number;
  last: number;
}

/** Program name → seconds of CPU. */
export type CpuSeconds = Record<string, number>;

const names = new Map<string, string>();

/** The program's file name (argv[0]): Node 24 calls every Node process's main thread `MainThread`. */
function nameOf(pid: string, comm: string): string {
  let argv0 = '';
  try {
    argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
  } catch {
    // ended meanwhile
  }
  const name = pid === String(process.pid) ? 'bench' : argv0 ? (argv0.split('/').pop() ?? comm) : comm;
  names.set(pid, name);
  return name;
}

function readTicks(): Map<number, { comm: string; ticks: number }> {
  const found = new Map<number, { comm: string; ticks: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // comm is in parentheses and may hold spaces; the fields after it are space-separated.
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      // After comm: state is field 3 of the whole line, utime 14, stime 15, cutime 16, cstime 17.
      const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i] ?? 0), 0);
      found.set(Number(entry), { comm: names.get(entry) ?? nameOf(entry, comm), ticks });
    } catch {
      // ended while read
    }
  }
  return found;
}

/** Starts sampling every `intervalMs`; `stop()` returns the CPU seconds per process name over the span. */
export async function trackCpu(intervalMs = 1_000): Promise<{ stop(): Promise<CpuSeconds> }> {
  const seen = new Map<number, Seen>();
  const sample = (initial: boolean) => {
    for (const [pid, { comm, ticks }] of readTicks()) {
      const known = seen.get(pid);
      if (known) known.last = ticks;
      else seen.set(pid, { comm, first: initial ? ticks : 0, last: ticks });
    }
  };
  sample(true);
  const timer = setInterval(() => sample(false), intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      sample(false);
      const seconds: CpuSeconds = {};
      for (const { comm, first, last } of seen.values()) seconds[comm] = (seconds[comm] ?? 0) + (last - first) / TICKS_PER_SECOND;
      return seconds;
    },
  };
}

/** The `top` names by CPU, as `name 12.3 s`, joined. */
export function describeCpu(seconds: CpuSeconds, top = 8): string {
  return Object.entries(seconds)
    .filter(([, s]) => s > 0)
    .sort(([, a], [, b]) => b - a)
    .slice(0, top)
    .map(([name, s]) => `${name} ${s.toFixed(1)} s`)
    .join(', ');
}
