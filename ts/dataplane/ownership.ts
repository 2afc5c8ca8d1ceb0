// Teardown that removes only an attachment's own interface (the workload end of the veth whose
// host end is the attachment's): a DEL with another workload's namespace, or an interface name
// netplug never made (`lo`), leaves what is there alone.
import { addon } from '../native/addon.ts';
import { timedKernel } from './timing.ts';
import { DataplaneError } from './errors.ts';
import type { TeardownResult } from './index.ts';

/** What teardown did; `foreign`: the interface is not the attachment's and was left alone. */
export type AttachmentTeardown = TeardownResult | 'foreign';

/** Deletes `ifname` in `netns` if it is the peer of the host veth `hostIfname`; missing is success. */
export async function teardownAttachment(netns: string, ifname: string, hostIfname: string): Promise<AttachmentTeardown> {
  const outcome = await timedKernel(addon().teardownAttachment(netns, ifname, hostIfname));
  if (outcome.error) throw new DataplaneError(outcome.error);
  if (outcome.result === undefined) throw new Error('the data-plane addon returned neither a result nor an error from teardownAttachment');
  return outcome.result;
}
