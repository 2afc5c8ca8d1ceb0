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

let worker: Worker | undefined;
let nextId = 0;
const waiting = new Map<number, { resolve(interfaces: Interfaces): void; reject(err: Error): void }>();

function failAll(err: Error): void {
  for (const pending of waiting.values()) pending.reject(err);
  waiting.clear();
  worker = undefined;
}

function listingWorker(): Worker {
  if (worker) return worker;
  const made = new Worker(WORKER_SOURCE, { eval: true, name: 'netplug-interfaces' });
  made.on('message', (reply: Reply) => {
    const pending = waiting.get(reply.id);
    if (!pending) return;
    waiting.delete(reply.id);
    if (waiting.size === 0) made.unref();
    if (reply.interfaces) pending.resolve(reply.interfaces);
    else pending.reject(new Error(`cannot list the node's interfaces: ${reply.error}`));
  });
  // A worker that failed or ended is made again by the next listing.
  made.on('error', (err) => failAll(new Error(`cannot list the node's interfaces: ${err.message}`)));
  made.on('exit', (code) => failAll(new Error(`cannot list the node's interfaces: the listing thread ended (${code})`)));
  worker = made;
  return made;
}

/** node:os's networkInterfaces(), listed on a worker thread. */
export function listInterfaces(): Promise<Interfaces> {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    const listing = listingWorker();
    // Held while a listing is under way, as any I/O holds the process; not between listings.
    if (waiting.size === 0) listing.ref();
    waiting.set(id, { resolve, reject });
    listing.postMessage(id);
  });
}
