// The node's interfaces and their addresses, listed by the data-plane addon on one of its threads,
// not on the agent's event loop. The listing is a netlink dump of every link and address (a veth
// per pod); node:os's networkInterfaces() makes the same dump synchronously, and while pods come
// and go the kernel can hold it for a second (measured during a 100-pod Deployment, on one node
// of three): on the event loop that second stopped every ADD the agent serves and every policy
// pass. The addon's listing costs no thread of the agent's own and no second V8 isolate.
import { listInterfaceAddresses, type InterfaceAddressInfo } from '../../dataplane/interfaces.ts';
import type { Interfaces } from './node-address.ts';

/** How long a listing may take before it fails (the next read starts another, on another of the addon's threads). */
const LISTING_DEADLINE_MS = 30_000;

/** The interfaces that are up and running, by name, in node:os's form; rejects with a one-line message. */
export async function listInterfaces(
  list: () => Promise<InterfaceAddressInfo[]> = listInterfaceAddresses,
  deadlineMs = LISTING_DEADLINE_MS,
): Promise<Interfaces> {
  let timer: NodeJS.Timeout | undefined;
  // A dump that never ends would leave the node's address unknown for good: the listing gives up.
  // (A netlink read with no answer fails in the addon after 30 s too, ending its thread; this also
  // bounds a dump that keeps answering and never finishes.)
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${deadlineMs / 1000} s`)), deadlineMs);
  });
  let listed: InterfaceAddressInfo[];
  try {
    listed = await Promise.race([list(), deadline]);
  } catch (err) {
    throw new Error(`cannot list the node's interfaces: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    clearTimeout(timer);
  }
  const interfaces: Interfaces = {};
  for (const { interface: name, address, family, prefixLength, internal } of listed) {
    const held = interfaces[name] ?? [];
    held.push({ address, family: family === 4 ? 'IPv4' : 'IPv6', internal, cidr: `${address}/${prefixLength}` });
    interfaces[name] = held;
  }
  return interfaces;
}
