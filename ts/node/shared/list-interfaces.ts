// The node's interfaces and their addresses, listed by the data-plane addon on one of its threads,
// not on the agent's event loop. The listing is a netlink dump of every link and address (a veth
// per pod); node:os's networkInterfaces() makes the same dump synchronously, and while pods come
// and go the kernel can hold it for a second (measured during a 100-pod Deployment, on one node
// of three): on the event loop that second stopped every ADD the agent serves and every policy
// pass. The addon's listing costs no thread of the agent's own and no second V8 isolate.
import { listInterfaceAddresses, type InterfaceAddressInfo } from '../../dataplane/interfaces.ts';
import type { Interfaces } from './node-address.ts';

/**
 * The interfaces that are up and running, by name, in node:os's form; rejects with a one-line
 * message. A listing that gets no answer fails in the addon after 30 s (its netlink sockets'
 * patience), so the node's address is never left unknown for good.
 */
export async function listInterfaces(list: () => Promise<InterfaceAddressInfo[]> = listInterfaceAddresses): Promise<Interfaces> {
  let listed: InterfaceAddressInfo[];
  try {
    listed = await list();
  } catch (err) {
    throw new Error(`cannot list the node's interfaces: ${err instanceof Error ? err.message : String(err)}`);
  }
  const interfaces: Interfaces = {};
  for (const { interface: name, address, family, prefixLength, internal } of listed) {
    const held = interfaces[name] ?? [];
    held.push({ address, family: family === 4 ? 'IPv4' : 'IPv6', internal, cidr: `${address}/${prefixLength}` });
    interfaces[name] = held;
  }
  return interfaces;
}
