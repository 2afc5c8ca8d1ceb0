// Typed facade over the native data plane. Each call runs on a thread of the addon's pool;
// kernel failures arrive as outcomes and are thrown here as DataplaneError.
import { addon } from '../native/addon.ts';
import type { Difference, WorkloadInterfaces, WorkloadSpec } from '../native/binding.d.ts';
import { DataplaneError } from './errors.ts';
import { timedKernel } from './timing.ts';

export { DataplaneError } from './errors.ts';
export type { Difference, WorkloadInterfaces, WorkloadSpec } from '../native/binding.d.ts';

export type TeardownResult = 'removed' | 'namespace-gone' | 'link-gone';

/** `prefix` + 11 hex digits of SHA-1(identity): the host-side name the policy agent also derives. */
export function hostInterfaceName(prefix: string, identity: string): string {
  return addon().hostInterfaceName(prefix, identity);
}

/** Creates and configures the workload's veth pair; on failure nothing is left behind. */
export async function setupWorkload(spec: WorkloadSpec): Promise<WorkloadInterfaces> {
  const outcome = await timedKernel(addon().setupWorkload(spec));
  if (outcome.error) throw new DataplaneError(outcome.error);
  return required(outcome.interfaces, 'setupWorkload');
}

/** Deletes the workload's interface. A missing namespace, empty path or missing link is success. */
export async function teardownWorkload(netns: string, ifname: string): Promise<TeardownResult> {
  const outcome = await timedKernel(addon().teardownWorkload(netns, ifname));
  if (outcome.error) throw new DataplaneError(outcome.error);
  return required(outcome.result, 'teardownWorkload');
}

export type Presence = 'absent' | 'attached' | 'foreign';

/**
 * What `ifname` in the namespace at `netns` is: absent (also when the namespace is), `attached`
 * (the workload end of the veth whose host end is `hostIfname`), or some `foreign` link.
 */
export async function interfacePresence(netns: string, ifname: string, hostIfname: string): Promise<Presence> {
  const outcome = await timedKernel(addon().interfacePresence(netns, ifname, hostIfname));
  if (outcome.error) throw new DataplaneError(outcome.error);
  return required(outcome.presence, 'interfacePresence') as Presence;
}

/**
 * Adds the host routes of `addresses` via the host veth `hostIfname`, for a set-up made with
 * `hostRoutes: false` (once the addresses are surely the workload's).
 */
export async function addHostRoutes(hostIfname: string, addresses: readonly string[]): Promise<void> {
  const outcome = await timedKernel(addon().addHostRoutes(hostIfname, [...addresses]));
  if (outcome.error) throw new DataplaneError(outcome.error);
}

/**
 * Removes the host routes (/32, /128) set-up made via the host veth `hostIfname`, at once; returns
 * how many. The veth's own deletion flushes them only after RCU grace periods: once they are gone,
 * nothing on the host leads to the attachment's addresses and they may be given to another workload.
 * Only if the veth is the attachment's (its peer is `ifname` in `netns`): every sandbox of a pod
 * has the same host veth name, and a DEL of an old one (its namespace gone) must not cut off the
 * pod's current sandbox.
 */
export async function removeHostRoutes(netns: string, ifname: string, hostIfname: string): Promise<number> {
  const outcome = await timedKernel(addon().removeHostRoutes(netns, ifname, hostIfname));
  if (outcome.error) throw new DataplaneError(outcome.error);
  return required(outcome.removed, 'removeHostRoutes');
}

/** Every difference between the kernel and what setupWorkload(spec) produces; empty if none. */
export async function checkWorkload(spec: WorkloadSpec): Promise<Difference[]> {
  const outcome = await timedKernel(addon().checkWorkload(spec));
  if (outcome.error) throw new DataplaneError(outcome.error);
  return required(outcome.differences, 'checkWorkload');
}

function required<T>(value: T | undefined, call: string): T {
  if (value === undefined) throw new Error(`the data-plane addon returned neither a result nor an error from ${call}`);
  return value;
}

/** A namespace path lent a descriptor; release() ends the loan. */
export interface NetnsLoan {
  release(): void;
}

/**
 * Lends the descriptor `fd` (taken over) to the namespace path `netns`: until the loan is released,
 * every call here for `netns` works on the namespace behind `fd`, and reports `netns` as its name.
 * Undefined (and `fd` closed) if `netns` is lent already for another namespace.
 */
export function lendNetns(netns: string, fd: number): NetnsLoan | undefined {
  return addon().lendNetns(netns, fd) ?? undefined;
}
