// Kernel work a call handed over behind its answer (a pod's DEL: the veth's deletion), by the
// path of the namespace the call named. The next call on that path waits for it: an ADD into the
// namespace a DEL just left finds the interface gone, as after the one-shot's DEL.
export class NamespaceTails {
  readonly #tails = new Map<string, Promise<void>>();

  /** Resolves once the work earlier calls on `path` handed over has ended; undefined if there is none. */
  pending(path: string | undefined): Promise<void> | undefined {
    return path ? this.#tails.get(path) : undefined;
  }

  /** `work` that a call on `path` handed over: later calls on that path wait for its end. */
  add(path: string | undefined, work: readonly Promise<unknown>[]): void {
    if (!path || work.length === 0) return;
    const tail: Promise<void> = Promise.allSettled([this.#tails.get(path), ...work]).then(() => {
      if (this.#tails.get(path) === tail) this.#tails.delete(path);
    });
    this.#tails.set(path, tail);
  }
}
