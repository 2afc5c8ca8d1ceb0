// The node's interfaces and their addresses (node:os's networkInterfaces) listed on a worker
// thread, not on the agent's event loop. The listing is a netlink dump of every link and address
// (a veth per pod), and node:os has no asynchronous form: while pods come and go the kernel can
// hold such a dump for a second (measured during a 100-pod Deployment, on one node of three),
// and on the event loop that second stops every ADD the agent serves and every policy pass. The
// addon's netlink bindings list no addresses by interface name, so a worker running node:os's
// own listing is the least code: one thread, made at the first listing, that keeps the process
// alive only while a listing is under way.
import { Worker } from 'node:worker_threads';

import type { Interfaces } from './node-address.ts';

// Evaluated in the worker (a script of its own: the agent is one bundled executable).
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { networkInterfaces } = require('node:os');
parentPort.on('message', (id) => {
  try {
    parentPort.postMessage({ id, interfaces: networkInterfaces() });
  } catch (err) {
    parentPort.postMessage({ id, error: String((err && err.message) || err) });
  }
});
`;

interface Reply {
  id: number;
  interfaces?: Interfaces;
  error?: string;
}

interface Pending {
  resolve(interfaces: Interfaces): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/** How long a listing may take before its thread is stopped and the listing fails (the next read starts another). */
const LISTING_DEADLINE_MS = 30_000;

/** Listings on one thread at a time, made at the first listing and again after one failed or ended. */
export class InterfaceLister {
  readonly #source: string;
  readonly #deadlineMs: number;
  #worker: Worker | undefined;
  #nextId = 0;
  readonly #waiting = new Map<number, Pending>();

  /** The thread's script and the deadline are the agent's own; tests give others. */
  constructor(options: { source?: string; deadlineMs?: number } = {}) {
    this.#source = options.source ?? WORKER_SOURCE;
    this.#deadlineMs = options.deadlineMs ?? LISTING_DEADLINE_MS;
  }

  /** node:os's networkInterfaces(), listed on the thread; rejects with a one-line message. */
  list(): Promise<Interfaces> {
    return new Promise((resolve, reject) => {
      const id = this.#nextId++;
      const thread = this.#thread();
      // Held while a listing is under way, as any I/O holds the process; not between listings.
      if (this.#waiting.size === 0) thread.ref();
      // A thread that never answers would leave the node's address unknown for good: it is stopped.
      const timer = setTimeout(() => {
        this.#failAll(thread, `no answer in ${this.#deadlineMs / 1000} s (the listing thread was stopped)`);
        void thread.terminate();
      }, this.#deadlineMs);
      timer.unref();
      this.#waiting.set(id, { resolve, reject, timer });
      thread.postMessage(id);
    });
  }

  #thread(): Worker {
    if (this.#worker) return this.#worker;
    const made = new Worker(this.#source, { eval: true, name: 'netplug-interfaces' });
    made.on('message', (reply: Reply) => {
      const pending = this.#waiting.get(reply.id);
      if (!pending) return;
      this.#waiting.delete(reply.id);
      clearTimeout(pending.timer);
      if (this.#waiting.size === 0) made.unref();
      if (reply.interfaces) pending.resolve(reply.interfaces);
      else pending.reject(new Error(`cannot list the node's interfaces: ${reply.error}`));
    });
    made.on('error', (err) => this.#failAll(made, err.message));
    made.on('exit', (code) => this.#failAll(made, `the listing thread ended (${code})`));
    this.#worker = made;
    return made;
  }

  /** Fails every listing under way on `made`, if it is still the thread. */
  #failAll(made: Worker, why: string): void {
    if (this.#worker !== made) return;
    this.#worker = undefined;
    for (const pending of this.#waiting.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error(`cannot list the node's interfaces: ${why}`));
    }
    this.#waiting.clear();
  }
}

const agentLister = new InterfaceLister();

/** node:os's networkInterfaces(), listed on the agent's listing thread. */
export function listInterfaces(): Promise<Interfaces> {
  return agentLister.list();
}
