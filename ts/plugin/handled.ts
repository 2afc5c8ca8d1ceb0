// Promises started now and awaited later (early work): their failures must not count as unhandled
// in between.

/** The same promise, with its failure marked as handled: whoever awaits it later still sees it. */
export function handled<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}
