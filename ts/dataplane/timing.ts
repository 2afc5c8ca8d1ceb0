// Where a resident host times the kernel work of the command it serves (netplug-node's per-call
// timings, for the benchmark's breakdown): each call here is reported, as its start and end on the
// monotonic clock, to whatever recorder `current` gives at the time. Nothing is timed without one.

/** Told each kernel call's start and end (milliseconds on the monotonic clock). */
export type KernelRecorder = (startMs: number, endMs: number) => void;

let current: () => KernelRecorder | undefined = () => undefined;

/** Sets where kernel calls are reported (the command being served's recorder, or none). */
export function recordKernelCallsWith(recorder: () => KernelRecorder | undefined): void {
  current = recorder;
}

/** Milliseconds on the monotonic clock (CLOCK_MONOTONIC: comparable across processes). */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** `call` (a kernel call under way), reported to the current recorder when it settles. */
export function timedKernel<T>(call: Promise<T>): Promise<T> {
  const recorder = current();
  if (!recorder) return call;
  const start = monotonicMs();
  const done = () => recorder(start, monotonicMs());
  call.then(done, done);
  return call;
}
