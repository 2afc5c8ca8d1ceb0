// Network policy on this node (NETPLUG_POLICY_ENFORCEMENT): the `policy` part of netplug's table
// `inet netplug`, compiled by ts/policy/ from what the shared informers follow (follow-resources.ts)
// and fed to the compiler level-triggered (feed-engine.ts). One controller with one key: informer
// events mark objects dirty and trigger it after a short settle, so a burst of events (a relist,
// a namespace of pods) gives one pass (program-policy.ts); it runs again every few seconds, which
// re-checks the status files, and gives the part again every refresh interval, which repairs the
// table. The CNI service's `workloadNetworked` (program-networked-pod.ts) runs a pass for an ADD
// before its policy wait and its answer.
// Readiness `policy`: the first pass's part is in the kernel and the last pass succeeded.
// Metrics: policy-metrics.ts. A policy that cannot be programmed is logged and counted; the rest
// of the table is written without it.
import * as k8s from '@kubernetes/client-node';

import type { NftComposer } from '../../dataplane/nft-composer.ts';
import type { KubePod } from '../../policy/endpoints.ts';
import { PolicyEngine } from '../../policy/engine.ts';
import { aborted } from '../../runtime/clock.ts';
import { Controller } from '../../runtime/controller.ts';
import { describeError } from '../../runtime/errors.ts';
import type { NodeParts, Subsystem } from '../shared/subsystem.ts';
import { programNetworkedPod, type ProgramNetworkedPod } from './program-networked-pod.ts';
import { EngineFeed } from './feed-engine.ts';
import { FOLLOWED_KINDS, followPolicyResources, objectKey } from './follow-resources.ts';
import { PolicyMetrics } from './policy-metrics.ts';
import { PolicyProgrammer } from './program-policy.ts';
import { StatusFiles } from './write-status-files.ts';

export { POLICY_PART } from '../../policy/names.ts';

const KEY = 'policy';
/** Events this close together give one pass. */
const SETTLE_MS = 50;
/** How often a pass runs without events: the status files are checked against the pods. */
const STATUS_RESYNC_MS = 10_000;
const WAITING_RETRY_MS = 500;

/** What of a pod the engine reads: other updates (conditions, container statuses) trigger nothing. */
const podSignificant = (pod: k8s.V1Pod) => [
  pod.metadata?.labels,
  pod.metadata?.uid,
  pod.spec?.nodeName,
  pod.spec?.hostNetwork,
  pod.spec?.serviceAccountName,
  pod.spec?.containers?.map((c) => c.ports),
  pod.status?.podIPs,
  pod.status?.podIP,
  pod.status?.phase,
];

export interface NetworkPolicySubsystem extends Subsystem {
  /** The CNI service's `workloadNetworked` (main gives it to cniService). */
  workloadNetworked: ProgramNetworkedPod;
}

export function networkPolicy(parts: NodeParts, table: Pick<NftComposer, 'setPart'>): NetworkPolicySubsystem {
  const { settings, manager, informers, kube } = parts;
  const log = parts.log.child('policy');
  const resources = followPolicyResources(informers, kube);
  const engine = new PolicyEngine({ nodeName: settings.nodeName, interfacePrefix: settings.interfacePrefix });
  const feed = new EngineFeed(engine, resources, { nodeName: settings.nodeName, interfacePrefix: settings.interfacePrefix, log });
  const metrics = new PolicyMetrics(manager.metrics.registry);
  const files = new StatusFiles(settings.endpointStatusPathPrefix);
  const programmer = new PolicyProgrammer({ feed, table, files, metrics, log, repairMs: settings.routeRefreshMs });
  let problem: string | undefined = 'network policy is not programmed yet';

  const controller = new Controller({
    name: 'policy',
    log,
    metrics: manager.metrics,
    settleMs: SETTLE_MS,
    resyncMs: STATUS_RESYNC_MS,
    backoff: { initialMs: 500, maxMs: 30_000 },
    reconcile: async () => {
      try {
        const outcome = await programmer.exclusive(() => programmer.pass());
        if (outcome === 'waiting') {
          problem = "netplug's table waits for its other parts";
          return { requeueAfterMs: WAITING_RETRY_MS };
        }
        if (problem !== undefined) log.info(`network policy programmed (${engine.stats().localEndpoints} local pods)`);
        problem = undefined;
        return feed.pending() ? { requeueAfterMs: 0 } : undefined;
      } catch (err) {
        // The controller logs the failure; the pods already programmed stay as they are.
        problem = `network policy is not programmed: ${describeError(err)}`;
        throw err;
      }
    },
  });

  const stopHandlers: (() => void)[] = [];
  for (const kind of FOLLOWED_KINDS) {
    const changed = (object: k8s.KubernetesObject) => {
      const key = objectKey(object);
      feed.mark(kind, key);
      if (kind === 'Pod' && (object as k8s.V1Pod).spec?.nodeName === settings.nodeName) programmer.sawPod(key);
      controller.trigger(KEY);
    };
    stopHandlers.push(
      resources[kind].addHandler(
        {
          add: changed,
          update: changed,
          delete: (object) => {
            if (kind === 'Pod') feed.forget(objectKey(object), object.metadata?.uid);
            changed(object);
          },
          synced: () => {
            feed.markWhole(kind);
            controller.trigger(KEY);
          },
        },
        kind === 'Pod' ? { significant: (object) => podSignificant(object as k8s.V1Pod) } : {},
      ),
    );
  }
  feed.markWhole();
  controller.enqueue(KEY);
  manager.health.add('policy', () => problem);
  // Nothing is written before every followed kind was listed whole: a table made from a partial
  // view would open what a policy not yet listed closes.
  manager.add(controller, { waitFor: Object.values(resources) });

  const core = kube.makeApiClient(k8s.CoreV1Api);
  const workloadNetworked = programNetworkedPod({
    feed,
    programmer,
    pods: resources.Pod,
    readPod: async (namespace, name) => (await core.readNamespacedPod({ namespace, name })) as unknown as KubePod,
    log,
  });
  return {
    workloadNetworked,
    async run(signal) {
      await aborted(signal);
      for (const stop of stopHandlers) stop();
      // The table stays in the kernel: the pods stay policed (and new ones closed) while the agent is away.
    },
  };
}
