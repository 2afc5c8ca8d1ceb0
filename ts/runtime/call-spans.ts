// Named spans of a served call's work done by other parts of the agent (netplug-node's per-call
// timings, NETPLUG_CNI_TIMINGS_FILE): a subsystem that works for the call (the policy pass an ADD
// waits for) marks its steps with `span`, and they go to whatever recorder the call being served
// runs under, without the subsystem knowing the CNI service. Nothing is timed without a recorder.
import { AsyncLocalStorage } from 'node:async_hooks';

/** Told a span's name as it starts; returns what is called as it ends (the recorder keeps the clock). */
export type SpanRecorder = (name: string) => () => void;

const recorders = new AsyncLocalStorage<SpanRecorder>();

/** Runs `work` with its spans (and those of what it starts) told to `recorder`. */
export function recordSpans<T>(recorder: SpanRecorder, work: () => T): T {
  return recorders.run(recorder, work);
}

/** Runs `work`, telling the current call's recorder (if any) how long it took as `name`. */
export async function span<T>(name: string, work: () => T | Promise<T>): Promise<T> {
  const recorder = recorders.getStore();
  if (!recorder) return work();
  const end = recorder(name);
  try {
    return await work();
  } finally {
    end();
  }
}
