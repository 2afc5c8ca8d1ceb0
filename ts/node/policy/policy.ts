// Network policy on this node (NETPLUG_POLICY_ENFORCEMENT): the `policy` part of netplug's table
// `inet netplug`, compiled by ts/policy/ from what the shared informers follow on the Kubernetes
// datastore (follow-resources.ts), or on etcd from what the datastore's watch follows
// (follow-datastore.ts: the documents netplug-kube-controllers and the plugin write), and fed to
// the compiler level-triggered (feed-engine.ts). One controller with one key: events mark objects dirty and trigger it, at once or, while events keep coming, after a short settle, so a burst of events (a relist,
// a namespace of pods) gives one pass (program-policy.ts); it runs again every few seconds, which
// re-checks the status files, and gives the part again every refresh interval, which repairs the
// table. The CNI service's `workloadNetworked` (program-networked-pod.ts; on etcd
// program-networked-endpoint.ts) runs a pass for an ADD before its policy wait and its answer; on
// the Kubernetes datastore its `workloadPlanned` starts that pass while the ADD commits its addresses.
// Readiness `policy`: the first pass's part is in the kernel and the last pass succeeded.
// Metrics: policy-metrics.ts, and what policy dropped (denied-counters.ts). A policy that cannot be
// programmed is logged, counted and told as an Event on it (report-issues.ts); the rest of the
// table is written without it. The packets of Log rules are written to the agent's log (log-packets.ts).
import { performance } from 'node:perf_hooks';

import * as k8s from '@kubernetes/client-node';

import type { NftComposer } from '../../dataplane/nft-composer.ts';
import type { KubePod } from '../../policy/endpoints.ts';
import { PolicyEngine } from '../../policy/engine.ts';
import { aborted } from '../../runtime/clock.ts';
import { Controller } from '../../runtime/controller.ts';
import { describeError } from '../../runtime/errors.ts';
import { EventRecorder } from '../../runtime/events.ts';
import type { Logger } from '../../log/logger.ts';
import { netplugCounters } from '../shared/netplug-table.ts';
import type { Gate, NodeParts, Subsystem } from '../shared/subsystem.ts';
import { registerDeniedCounters } from './denied-counters.ts';
import { programNetworkedPod, type ProgramNetworkedPod, type ProgramPlannedPod } from './program-networked-pod.ts';
import type { FeedKind } from './convert-resources.ts';
import { EngineFeed } from './feed-engine.ts';
import { followPolicyDocuments, onNode, podKeyOf } from './follow-datastore.ts';
import { cached, FOLLOWED_KINDS, followPolicyResources, objectKey, type FollowedKind } from './follow-resources.ts';
import { LOG_GROUP, logPolicyPackets } from './log-packets.ts';
import { startFlowLogs } from './flow-logs.ts';
import { FLOW_LOG_GROUP } from './record-flows.ts';
import { programNetworkedEndpoint } from './program-networked-endpoint.ts';
import { PolicyMetrics } from './policy-metrics.ts';
import { PolicyProgrammer } from './program-policy.ts';
import { issueReporter } from './report-issues.ts';
import { StatusFiles } from './write-status-files.ts';

export { POLICY_PART } from '../../policy/names.ts';

const KEY = 'policy';
/**
 * Events this close together give one pass: an event after a quiet spell is passed at once (a
 * policy or a pod alone waits for nothing); one close behind another waits this long, so that a
 * burst (a relist, a namespace of pods) gives few passes.
 */
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

const hasAddress = (pod: k8s.V1Pod) => Boolean(pod.status?.podIP) || (pod.status?.podIPs?.length ?? 0) > 0;

export interface NetworkPolicySubsystem extends Subsystem {
  /** Its part in the ADDs the CNI service serves (main gives them to cniService). */
  callHooks: CallHooks;
}

/** `workloadPlanned` only on the Kubernetes datastore: on etcd the pod's endpoint is read once committed. */
interface CallHooks {
  workloadNetworked: ProgramNetworkedPod;
  workloadPlanned?: ProgramPlannedPod;
}

export function networkPolicy(
  parts: NodeParts,
  table: Pick<NftComposer, 'setPart'> & Partial<Pick<NftComposer, 'updatePart'>>,
): NetworkPolicySubsystem {
  const { settings, manager } = parts;
  const log = parts.log.child('policy');
  const engine = new PolicyEngine({
    nodeName: settings.nodeName,
    interfacePrefix: settings.interfacePrefix,
    logGroup: LOG_GROUP,
    failsafe: settings.failsafe,
    ...(settings.flowLogs ? { flowLogGroup: FLOW_LOG_GROUP } : {}),
  });
  const metrics = new PolicyMetrics(manager.metrics.registry);
  registerDeniedCounters({ registry: manager.metrics.registry, read: netplugCounters(), owners: () => engine.denyCounters(), log });
  const files = new StatusFiles(settings.endpointStatusPathPrefix);
  let problem: string | undefined = 'network policy is not programmed yet';
  // Events only come once the sources below are made, after `programmer` is.
  let programmer: PolicyProgrammer | undefined;
  let lastEvent = Number.NEGATIVE_INFINITY;
  const events: SourceEvents = {
    trigger: () => {
      const now = performance.now();
      controller.enqueueAfter(KEY, now - lastEvent < SETTLE_MS ? SETTLE_MS : 0);
      lastEvent = now;
    },
    sawPod: (key) => programmer?.sawPod(key),
  };
  const source =
    settings.datastoreType === 'kubernetes' ? followKubernetesApi(parts, engine, events, log) : followDatastore(parts, engine, events, log);
  const { feed } = source;
  // A policy that cannot be programmed is also told as an Event on its object (report-issues.ts).
  const onNewIssue = issueReporter({
    recorder: new EventRecorder({ kube: parts.kube, component: 'netplug-node', host: settings.nodeName, log }),
    kube: parts.kube,
    nodeName: settings.nodeName,
    datastore: settings.datastoreType,
    lookup: source.lookup,
    log,
  });
  const programming = new PolicyProgrammer({ feed, table, files, metrics, log, repairMs: settings.routeRefreshMs, onNewIssue });
  programmer = programming;

  const controller = new Controller({
    name: 'policy',
    log,
    metrics: manager.metrics,
    resyncMs: STATUS_RESYNC_MS,
    backoff: { initialMs: 500, maxMs: 30_000 },
    reconcile: async () => {
      try {
        const outcome = await programming.exclusive(() => programming.pass());
        if (outcome === 'waiting') {
          problem = "netplug's table waits for its other parts";
          return { requeueAfterMs: WAITING_RETRY_MS };
        }
        if (problem !== undefined) {
          const { localEndpoints, localHostEndpoints } = engine.stats();
          const { activePolicies, policyRules } = engine.stats();
          const { seconds, steps } = programming.lastPass;
          const took = Object.entries(steps)
            .map(([name, s]) => `${name} ${s.toFixed(3)} s`)
            .join(', ');
          log.info(
            `network policy programmed in ${seconds.toFixed(3)} s (${took}; ${localEndpoints} local pods, ${localHostEndpoints} host endpoints; ${activePolicies} policies, ${policyRules} rules)`,
          );
        }
        problem = undefined;
        return feed.pending() ? { requeueAfterMs: 0 } : undefined;
      } catch (err) {
        // The controller logs the failure; the pods already programmed stay as they are.
        problem = `network policy is not programmed: ${describeError(err)}`;
        throw err;
      }
    },
  });
  feed.markWhole();
  controller.enqueue(KEY);
  manager.health.add('policy', () => problem);
  // Nothing is written before every followed kind was listed whole: a table made from a partial
  // view would open what a policy not yet listed closes.
  manager.add(controller, { waitFor: source.waitFor });

  return {
    callHooks: source.callHooks(programming, () => controller.enqueue(KEY)),
    async run(signal) {
      const packets = logPolicyPackets({ log, group: LOG_GROUP });
      const flows = settings.flowLogs ? await startFlowLogs(settings.nodeName, settings.flowLogs, engine, metrics, log) : undefined;
      await aborted(signal);
      source.stop();
      await packets.stop();
      await flows?.stop();
      // The table stays in the kernel: the pods stay policed (and new ones closed) while the agent is away.
    },
  };
}

/** What a source tells the subsystem: something changed (a pass is due); a local pod was seen. */
interface SourceEvents {
  trigger(): void;
  sawPod(key: string): void;
}

interface PolicySource {
  feed: EngineFeed;
  waitFor: Gate[];
  /** The subsystem's part in the ADDs served here; `passSoon` has the controller run a pass. */
  callHooks(programmer: PolicyProgrammer, passSoon: () => void): CallHooks;
  /** The object of `key` as followed now (an event's object's uid). */
  lookup(kind: FeedKind, key: string): unknown;
  stop(): void;
}

/** The Kubernetes datastore: the API's objects through the shared informers. */
function followKubernetesApi(parts: NodeParts, engine: PolicyEngine, events: SourceEvents, log: Logger): PolicySource {
  const { settings, informers, kube } = parts;
  const resources = followPolicyResources(informers, kube);
  const feed = new EngineFeed(engine, resources, { nodeName: settings.nodeName, interfacePrefix: settings.interfacePrefix, log });
  const stopHandlers: (() => void)[] = [];
  for (const kind of FOLLOWED_KINDS) {
    const changed = (object: k8s.KubernetesObject, gone = false) => {
      const key = objectKey(object);
      feed.mark(kind, key);
      const pod = kind === 'Pod' ? (object as k8s.V1Pod) : undefined;
      if (pod?.spec?.nodeName === settings.nodeName) {
        events.sawPod(key);
        // A new pod of this node without an address has no interface to police yet (the dispatch
        // drops what an interface it does not map carries): its ADD programs it, with the
        // addresses it plans (program-networked-pod.ts), and a pass for it alone now would only
        // compete with that ADD. The next pass takes it in all the same.
        if (!gone && !hasAddress(pod) && !feed.localPods().has(key)) return;
      }
      events.trigger();
    };
    stopHandlers.push(
      resources[kind].addHandler(
        {
          add: (object) => changed(object),
          update: (object) => changed(object),
          delete: (object) => {
            if (kind === 'Pod') feed.forget(objectKey(object), object.metadata?.uid);
            changed(object, true);
          },
          synced: () => {
            feed.markWhole(kind);
            events.trigger();
          },
        },
        kind === 'Pod' ? { significant: (object) => podSignificant(object as k8s.V1Pod) } : {},
      ),
    );
  }
  const core = kube.makeApiClient(k8s.CoreV1Api);
  return {
    feed,
    waitFor: Object.values(resources),
    lookup: (kind, key) => (kind in resources ? cached(resources[kind as FollowedKind], key) : undefined),
    callHooks: (programmer, passSoon) =>
      programNetworkedPod({
        feed,
        programmer,
        pods: resources.Pod,
        readPod: async (namespace, name) => (await core.readNamespacedPod({ namespace, name })) as unknown as KubePod,
        passSoon,
        log,
      }),
    stop: () => {
      for (const stop of stopHandlers) stop();
    },
  };
}

/**
 * The etcd datastore: its documents through its watch (netplug-kube-controllers writes the
 * Kubernetes objects' there, the plugin the workload endpoints).
 */
function followDatastore(parts: NodeParts, engine: PolicyEngine, events: SourceEvents, log: Logger): PolicySource {
  const { settings, store } = parts;
  if (!store.follow) throw new Error(`network policy follows the datastore's watch, which ${store.description} does not offer`);
  const { nodeName } = settings;
  let feed: EngineFeed | undefined;
  const documents = followPolicyDocuments(store.follow.bind(store), {
    changed(kind, key, value) {
      feed?.mark(kind, key);
      if (kind === 'WorkloadEndpoint' && onNode(value, nodeName)) {
        const pod = podKeyOf(value);
        if (pod !== undefined) events.sawPod(pod);
      }
      events.trigger();
    },
    listed(kind) {
      feed?.markWhole(kind);
      events.trigger();
    },
  });
  const made = new EngineFeed(engine, documents.source, { nodeName, interfacePrefix: settings.interfacePrefix, log });
  feed = made;
  return {
    feed: made,
    waitFor: documents.gates,
    lookup: (kind, key) => documents.source.get(kind, key),
    // The workload endpoint the policy reads is committed with the addresses: nothing to begin before.
    callHooks: (programmer) => ({
      workloadNetworked: programNetworkedEndpoint({ nodeName, store, documents, feed: made, programmer, log }),
    }),
    stop: () => documents.stop(),
  };
}
