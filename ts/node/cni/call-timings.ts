// Where a served call's time goes, when asked for (NETPLUG_CNI_TIMINGS_FILE, for the benchmark's
// breakdown and for whoever wants to see what an ADD waits on): from the connection's accept to the
// answer, the handshake (request, accept, go), the time a datastore request of the call was under
// way, the kernel's (its calls through the addon) outside of that, and the rest (the agent's own
// work), with the named spans other subsystems mark in the work they do for the call (the policy
// pass an ADD waits for: ts/runtime/call-spans.ts), which may overlap the others. Times are on
// the monotonic clock, which the shim's runtime shares, so the shim's own part is the whole call's
// less the agent's.
import { AsyncLocalStorage } from 'node:async_hooks';

import { monotonicMs, recordKernelCallsWith } from '../../dataplane/timing.ts';
import { recordSpans } from '../../runtime/call-spans.ts';
import type { Store } from '../../store/store.ts';

/** One served call's timings: instants in milliseconds on the monotonic clock, spans in milliseconds. */
export interface CallTimings {
  command: string;
  container: string;
  /** The connection accepted; its request read whole; go received; the answer written. */
  accepted: number;
  read: number;
  go: number;
  answered: number;
  /** Between go and the answer: a datastore request under way (overlapping ones counted once). */
  datastoreMs: number;
  /** Between go and the answer: a kernel call under way. */
  kernelMs: number;
  /** The part of kernelMs with no datastore request under way. */
  kernelAloneMs: number;
  /** The first datastore request made after go (what the call did before it is the agent's work, and kernel calls). */
  firstDatastoreAt?: number;
  /** Between go and the answer: each named span other parts of the agent marked (ts/runtime/call-spans.ts). */
  spansMs?: Record<string, number>;
}

type Span = readonly [number, number];

/** The call being timed, for the kernel calls its code makes (they do not know the call). */
const calls = new AsyncLocalStorage<CallTrace>();
let installed = false;

export class CallTrace {
  readonly accepted: number;
  readonly read = monotonicMs();
  go = 0;
  private readonly datastore: Span[] = [];
  private readonly kernel: Span[] = [];
  private readonly named = new Map<string, Span[]>();

  constructor(accepted: number | undefined) {
    this.accepted = accepted ?? this.read;
    if (!installed) recordKernelCallsWith(() => calls.getStore()?.kernelCall);
    installed = true;
  }

  /** Runs `work` as this call: the kernel calls it makes, and the spans marked in it, are counted. */
  run<T>(work: () => Promise<T>): Promise<T> {
    return calls.run(this, () => recordSpans(this.namedSpan, work));
  }

  /** A span another subsystem marks in the call's work, from now until the returned end (ts/runtime/call-spans.ts). */
  readonly namedSpan = (name: string): (() => void) => {
    const start = monotonicMs();
    return () => {
      const spans = this.named.get(name) ?? [];
      spans.push([start, monotonicMs()]);
      this.named.set(name, spans);
    };
  };

  readonly kernelCall = (start: number, end: number): void => {
    this.kernel.push([start, end]);
  };

  /** `store`, its requests counted for this call. */
  timedStore(store: Store): Store {
    const spans = this.datastore;
    return new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (typeof value !== 'function' || property === 'close' || property === 'follow' || property === 'warmUp') return value;
        return (...args: unknown[]) => {
          const start = monotonicMs();
          const answer: unknown = value.apply(target, args);
          const done = () => spans.push([start, monotonicMs()]);
          if (answer instanceof Promise) answer.then(done, done);
          return answer;
        };
      },
    });
  }

  /** The timings, the answer written at `answered`. */
  answered(command: string, container: string, answered: number): CallTimings {
    const within = (spans: Span[]) => merged(spans.map(([a, b]): Span => [Math.max(a, this.go), Math.min(b, answered)]));
    const datastore = within(this.datastore);
    const kernel = within(this.kernel);
    const firstDatastoreAt = datastore[0]?.[0];
    return {
      command,
      container,
      accepted: this.accepted,
      read: this.read,
      go: this.go,
      answered,
      datastoreMs: total(datastore),
      kernelMs: total(kernel),
      kernelAloneMs: total(kernel) - total(intersection(kernel, datastore)),
      ...(firstDatastoreAt !== undefined ? { firstDatastoreAt } : {}),
      ...(this.named.size > 0 ? { spansMs: Object.fromEntries([...this.named].map(([name, spans]) => [name, total(within(spans))])) } : {}),
    };
  }
}

/** Spans sorted and joined where they overlap; empty ones dropped. */
function merged(spans: readonly Span[]): Span[] {
  const out: [number, number][] = [];
  for (const [a, b] of [...spans].filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0])) {
    const last = out.at(-1);
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

const total = (spans: readonly Span[]) => spans.reduce((sum, [a, b]) => sum + (b - a), 0);

/** Where two sets of merged spans overlap. */
function intersection(a: readonly Span[], b: readonly Span[]): Span[] {
  const out: Span[] = [];
  for (const [a0, a1] of a)
    for (const [b0, b1] of b) {
      const [start, end] = [Math.max(a0, b0), Math.min(a1, b1)];
      if (end > start) out.push([start, end]);
    }
  return out;
}
