// Start-up and registration, what must be in place before the node is ready and is then kept:
// - the nodename and MTU files the CNI plugin reads (written at start, where a failure stops the
//   agent, then checked every FILES_INTERVAL_MS; the MTU leaves room for the pools' encapsulation,
//   read once the default pool is in place, then followed);
// - this release recorded on the node (record-version.ts), then ClusterInformation "default" (the
//   lowest release the nodes record, the cluster type) and the default pool when the datastore
//   has none; on the etcd datastore, the node's Node resource with the Kubernetes Node's
//   labels (then kept by registration.ts). Each step is idempotent: a failed attempt is repeated
//   after a growing delay;
// - with USE_POD_CIDR=true (host-local) no default pool: the Node's pod CIDRs are recorded instead
//   (follow-pod-cidrs.ts).
// Readiness: `start-up` (the work above done), `datastore` (it answers a read, every
// CHECK_INTERVAL_MS), `pod-cidrs` (with USE_POD_CIDR: the Node has some, and they are recorded).
import { ensureClusterInfo } from '../../ipam/cluster-info.ts';
import type { Logger } from '../../log/logger.ts';
import { CLUSTER_INFO_KEY } from '../../model/cluster-information.ts';
import { every, retry } from '../../runtime/backoff.ts';
import { describeError } from '../../runtime/errors.ts';
import { waitForSync } from '../../runtime/informers.ts';
import { NETPLUG_VERSION } from '../../version.ts';
import { keys } from '../../model/keys.ts';
import type { Entry } from '../../store/store.ts';
import { overheadOfPoolEntries } from '../shared/pod-mtu.ts';
import type { NodeSettings } from '../shared/settings.ts';
import type { Gate, NodeParts, Subsystem } from '../shared/subsystem.ts';
import { thisNodeInformer } from '../shared/this-node.ts';
import { ensureDefaultIpv6Pool, ensureDefaultPool } from './ensure-default-pool.ts';
import { followNode } from './follow-node.ts';
import { PodCidrRecord } from './follow-pod-cidrs.ts';
import { recordVersion } from './record-version.ts';
import { registerNode } from './register-node.ts';
import { registrationController } from './registration.ts';
import { writeNodeFiles } from './write-node-files.ts';

/** How often the datastore is asked whether it answers (readiness), and the files checked. */
const CHECK_INTERVAL_MS = 10_000;
/** A datastore that has not answered by then counts as unreachable. */
const CHECK_TIMEOUT_MS = 5_000;
const FILES_INTERVAL_MS = 10_000;
/** Between attempts of the start-up work: 1 s doubling to 30 s. */
const START_UP_BACKOFF = { initialMs: 1000, maxMs: 30_000, jitter: 0.1 };

export interface StartUp extends Subsystem {
  /** Passed once the start-up work is done: what waits for ClusterInformation and the default pool. */
  readonly done: Gate;
}

export function startUp(parts: NodeParts): StartUp {
  const { settings, store, kube, log, manager } = parts;
  const { health } = manager;
  const name = settings.nodeName;
  let started = false;
  let pass: () => void = () => undefined;
  const passed = new Promise<void>((resolve) => (pass = resolve));
  const done: Gate = { whenSynced: () => passed };
  const node = settings.datastoreType === 'etcdv3' || settings.usePodCidr ? thisNodeInformer(parts.informers, kube, name) : undefined;
  const podCidrs = settings.usePodCidr ? new PodCidrRecord(settings.varDir, name, log) : undefined;
  /** The pools' encapsulation overhead, once read (the MTU file keeps what it holds until then). */
  let overhead: number | undefined;
  const followPools = () => {
    const entries = parts.feed?.entries(keys.pools);
    if (entries) overhead = overheadOfPoolEntries(entries, settings.routes);
  };

  health.add('start-up', () => (started ? undefined : 'start-up work is not done yet'));
  health.poll('datastore', () => store.get(CLUSTER_INFO_KEY), {
    intervalMs: CHECK_INTERVAL_MS,
    timeoutMs: CHECK_TIMEOUT_MS,
    describe: (err) => `${store.description} does not answer: ${describeError(err)}`,
    pending: 'the datastore has not been checked yet',
  });
  // Named once start-up is done, as the one reason left.
  if (podCidrs) health.add('pod-cidrs', () => (started ? podCidrs.notReady() : undefined));
  // On the etcd datastore the Node resource's labels follow the Kubernetes Node's.
  if (node && settings.datastoreType === 'etcdv3') manager.add(registrationController(parts, node), { waitFor: [node, done] });

  /** What must be in place before the node is ready; each step is idempotent. */
  const work = async (signal: AbortSignal): Promise<void> => {
    // The release is recorded for the cluster's version only: a node that cannot record it is ready all the same.
    const recorded = await recordVersion(settings.datastoreType, store, kube, name, NETPLUG_VERSION).catch((err: Error) => {
      log.warning(`cannot record this node's release (${NETPLUG_VERSION}) on node "${name}": ${describeError(err)}`);
      return 'failed' as const;
    });
    if (recorded === 'missing')
      log.warning(`the Kubernetes Node "${name}" does not exist (yet): this node's release (${NETPLUG_VERSION}) is not recorded`);
    else if (recorded === 'recorded') log.info(`recorded release ${NETPLUG_VERSION} on node "${name}"`);
    const info = await ensureClusterInfo(store, NETPLUG_VERSION, settings.clusterType, (reason) =>
      log.warning(`cannot read the nodes' releases (${reason}): ClusterInformation's version is not raised`),
    );
    log.info(`ClusterInformation "default": netplugVersion ${info.netplugVersion}, clusterType ${info.clusterType}`);
    log.info(
      settings.usePodCidr
        ? "USE_POD_CIDR is true: no default pool (addresses come from each Node's spec.podCIDRs)"
        : await ensureDefaultPool(store, settings, kube, log),
    );
    const made6 = settings.usePodCidr ? undefined : await ensureDefaultIpv6Pool(store, settings);
    if (made6) log.info(made6);
    const [pools] = (await store.read([{ list: keys.pools }])) as Entry<unknown>[][];
    overhead = overheadOfPoolEntries(pools ?? [], settings.routes);
    keepFiles(settings, log, overhead);
    if (node && settings.datastoreType === 'etcdv3' && (await waitForSync([node], signal))) {
      const found = node.get(name);
      if (!found) log.warning(`the Kubernetes Node "${name}" does not exist (yet): registered without labels`);
      const labels = found?.metadata?.labels ?? {};
      const outcome = await registerNode(store, name, labels);
      log.info(`node "${name}" ${outcome === 'unchanged' ? 'registered already' : outcome} with labels ${JSON.stringify(labels)}`);
    }
  };

  return {
    done,
    async run(signal) {
      const following = node && podCidrs ? followNode(node, name, podCidrs.follower(), log) : undefined;
      const files = every(
        FILES_INTERVAL_MS,
        async () => {
          followPools();
          keepFiles(settings, log, overhead);
          podCidrs?.keep();
        },
        { signal },
      );
      const finished = await retry(
        async () => {
          await work(signal);
          return true;
        },
        {
          signal,
          backoff: START_UP_BACKOFF,
          failed: (err, delayMs) => log.warning(`start-up: ${describeError(err)}; trying again in ${(delayMs / 1000).toFixed(1)} s`),
        },
      );
      if (finished && !signal.aborted) {
        started = true;
        log.info('start-up work done');
        pass();
      }
      await files;
      await following?.stop();
    },
  };
}

/**
 * Writes the nodename and MTU files if they differ (`overhead`: writeNodeFiles'); false (logged) if
 * they cannot be written (at start, the agent stops).
 */
export function keepFiles(settings: NodeSettings, log: Logger, overhead?: number): boolean {
  try {
    const changed = writeNodeFiles(settings.varDir, settings.nodeName, overhead);
    if (changed.length > 0) log.info(`wrote ${changed.join(', ')} in ${settings.varDir}`);
    return true;
  } catch (err) {
    log.error(`cannot write ${settings.varDir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    return false;
  }
}
