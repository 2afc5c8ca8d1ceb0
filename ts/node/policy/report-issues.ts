// A policy that cannot be programmed, reported where its author looks: a Warning Event
// `PolicyNotProgrammed` on the object, naming the node, the field and the value (the pass logs it
// and counts it, program-policy.ts; it calls this once per problem as it first appears on this node,
// and the recorder aggregates repeats, ts/runtime/events.ts).
//
// The event's object: on the Kubernetes datastore the object the problem is in (a Kubernetes
// NetworkPolicy, netplug's projectnet.org/v3 policy or set, a Pod, a Namespace). On etcd, netplug's
// documents are not Kubernetes objects, and `kubectl describe` could find no event on them: a
// datastore policy converted from a Kubernetes NetworkPolicy (`knp.default.<name>`, written by
// netplug-kube-controllers with that policy's uid) reports on that NetworkPolicy; any other
// document on this node's Node, the message naming the document. An object the caches no longer
// hold (deleted since) is not reported: its problem went with it.
import * as k8s from '@kubernetes/client-node';

import { KUBERNETES_POLICY_PREFIX } from '../../model/policy.ts';
import { describeError } from '../../runtime/errors.ts';
import type { EventRecorder, InvolvedObject } from '../../runtime/events.ts';
import type { Log } from '../../runtime/log.ts';
import type { FeedKind } from './convert-resources.ts';
import type { NewIssue } from './program-policy.ts';

const NOT_PROGRAMMED_REASON = 'PolicyNotProgrammed';

const POLICY_API = 'projectnet.org/v3';
const API_VERSIONS: Partial<Record<FeedKind, string>> = {
  KubernetesNetworkPolicy: 'networking.k8s.io/v1',
  NetworkPolicy: POLICY_API,
  GlobalNetworkPolicy: POLICY_API,
  NetworkSet: POLICY_API,
  GlobalNetworkSet: POLICY_API,
  Tier: POLICY_API,
  Pod: 'v1',
  Namespace: 'v1',
  ServiceAccount: 'v1',
  HostEndpoint: 'crd.projectnet.org/v1',
};

/** Where a problem is reported: an object, its uid read from the followed `kind` and `key`; or the Node. */
export type IssueTarget = { object: Omit<InvolvedObject, 'uid'>; kind: FeedKind; key: string } | 'node';

/**
 * The object of a problem's resource (`<Kind>/<namespace>/<name>` or `<Kind>/<name>`, as the engine
 * and the feed name them).
 */
export function issueTarget(resource: string, datastore: 'kubernetes' | 'etcdv3'): IssueTarget {
  const slash = resource.indexOf('/');
  const kind = resource.slice(0, slash) as FeedKind;
  const key = resource.slice(slash + 1);
  const [namespace, name] = key.includes('/') ? (key.split('/', 2) as [string, string]) : [undefined, key];
  if (kind === 'NetworkPolicy' && namespace !== undefined && name.startsWith(KUBERNETES_POLICY_PREFIX)) {
    const original = name.slice(KUBERNETES_POLICY_PREFIX.length);
    return {
      object: { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', namespace, name: original },
      // On etcd the mirror carries the uid of the NetworkPolicy it came from.
      ...(datastore === 'kubernetes' ? { kind: 'KubernetesNetworkPolicy', key: `${namespace}/${original}` } : { kind, key }),
    };
  }
  const apiVersion = API_VERSIONS[kind];
  if (datastore !== 'kubernetes' || apiVersion === undefined) return 'node';
  const objectKind = kind === 'KubernetesNetworkPolicy' ? 'NetworkPolicy' : kind;
  return { object: { apiVersion, kind: objectKind, name, ...(namespace !== undefined ? { namespace } : {}) }, kind, key };
}

/** The event's message: the node, the resource, the field and what is wrong with its value. */
export function issueMessage(issue: NewIssue, nodeName: string): string {
  // The feed's messages start with the resource's own label (`NetworkPolicy "ns/name": field ...`).
  const detail = issue.field ? `field "${issue.field}": ${issue.message}` : issue.message.replace(/^\w+ "[^"]*": (?=field ")/, '');
  return `node ${nodeName} cannot program ${issue.resource}: ${detail}`;
}

export interface IssueReporterOptions {
  recorder: EventRecorder;
  kube: k8s.KubeConfig;
  nodeName: string;
  datastore: 'kubernetes' | 'etcdv3';
  /** The object of `key` as the subsystem follows it (an informer's cache, a datastore document). */
  lookup(kind: FeedKind, key: string): unknown;
  log: Log;
}

/** `onNewIssue` for the policy programmer: a Warning Event per new problem. */
export function issueReporter(options: IssueReporterOptions): (issue: NewIssue) => void {
  const { recorder, nodeName, datastore, lookup, log } = options;
  const core = options.kube.makeApiClient(k8s.CoreV1Api);
  let nodeUid: Promise<string | undefined> | undefined;
  const readNodeUid = () => {
    nodeUid ??= core.readNode({ name: nodeName }).then(
      (node) => node.metadata?.uid,
      (err) => {
        nodeUid = undefined;
        log.debug(`node ${nodeName} not read for its events: ${describeError(err)}`);
        return undefined;
      },
    );
    return nodeUid;
  };
  return (issue) => {
    const message = issueMessage(issue, nodeName);
    const target = issueTarget(issue.resource, datastore);
    if (target === 'node') {
      void readNodeUid().then((uid) =>
        recorder.record(
          { apiVersion: 'v1', kind: 'Node', name: nodeName, ...(uid ? { uid } : {}) },
          'Warning',
          NOT_PROGRAMMED_REASON,
          message,
        ),
      );
      return;
    }
    const uid = (lookup(target.kind, target.key) as k8s.KubernetesObject | undefined)?.metadata?.uid;
    if (uid === undefined) {
      log.debug(`no event for ${issue.resource}: not followed any more`);
      return;
    }
    recorder.record({ ...target.object, uid }, 'Warning', NOT_PROGRAMMED_REASON, message);
  };
}
