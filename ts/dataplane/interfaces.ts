// The addresses of the interfaces in the calling process's network namespace (netplug-node runs
// in the node's), listed on a thread of the addon: the kernel's dump of every link and address
// (a veth per pod) never holds the event loop, as node:os's synchronous listing does.
import { addon } from '../native/addon.ts';
import type { InterfaceAddressInfo } from '../native/binding.d.ts';
import { DataplaneError } from './errors.ts';

export type { InterfaceAddressInfo } from '../native/binding.d.ts';

/** Every address of the interfaces that are up and running, as node:os's networkInterfaces() lists them. */
export async function listInterfaceAddresses(): Promise<InterfaceAddressInfo[]> {
  const outcome = await addon().listInterfaces();
  if (outcome.error) throw new DataplaneError(outcome.error);
  if (!outcome.addresses) throw new Error('the data-plane addon returned neither a result nor an error from listInterfaces');
  return outcome.addresses;
}
