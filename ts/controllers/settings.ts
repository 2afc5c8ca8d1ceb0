// netplug-kube-controllers' settings, from its environment (names as the reference's
// kube-controllers takes them), parsed by one schema (runtime/settings.ts): a bad value stops the
// program with a line naming the variable and its value.
import * as z from 'zod/mini';

import { CONTROLLERS as CONTROLLERS_NAME } from '../render/objects.ts';
import { type LeaderElectionSettings, leaderElectionSchema, leaderElectionSettings } from '../runtime/leader-election.ts';
import { LOG_LEVEL } from '../runtime/log.ts';
import { duration, hostPort, list, oneOf, parseEnv, text } from '../runtime/settings.ts';
import { ETCD_ENVIRONMENT, etcdFromEnvironment } from '../store/etcd/environment.ts';
import type { DatastoreSettings } from '../store/open.ts';

const CONTROLLERS = ['node', 'ipam', 'policy', 'profile', 'workloadendpoint'] as const;
type ControllerName = (typeof CONTROLLERS)[number];
/**
 * The controllers that copy Kubernetes' objects into the etcd datastore. On the Kubernetes
 * datastore netplug-node reads those objects from the API itself: there they are ignored (a
 * line says so), as the reference's kube-controllers ignores them in KDD mode.
 */
const ETCD_ONLY_CONTROLLERS: ReadonlySet<ControllerName> = new Set(['policy', 'profile', 'workloadendpoint']);

/** The Lease the replicas elect their leader on (in their own namespace; the RBAC Role names it). */
const LEASE_NAME = CONTROLLERS_NAME;

const schema = z.object({
  DATASTORE_TYPE: oneOf(['etcdv3', 'kubernetes'], { default: 'etcdv3', problem: 'is not known; use "etcdv3" or "kubernetes"' }),
  KUBECONFIG: text(),
  ...ETCD_ENVIRONMENT,
  ENABLED_CONTROLLERS: list(CONTROLLERS, 'node,ipam'),
  LEAK_GRACE_PERIOD: duration('15m'),
  NETPLUG_CONTROLLERS_HEALTH_ADDR: hostPort('0.0.0.0:9094'),
  LOG_LEVEL,
  ...leaderElectionSchema(LEASE_NAME),
});

export interface ControllersSettings {
  datastore: DatastoreSettings & { datastore_type: 'etcdv3' | 'kubernetes' };
  /** What to log at start about deprecated ETCD_* variables (etcd datastore only). */
  etcdDeprecation?: string;
  /** The kubeconfig file; none: the pod's service account (in-cluster). */
  kubeconfig: string | undefined;
  enabled: ReadonlySet<ControllerName>;
  /** Named in ENABLED_CONTROLLERS but left out: the etcd-only ones on the Kubernetes datastore. */
  ignored: readonly ControllerName[];
  /** How long a pod must stay missing before its addresses are released. */
  leakGraceMs: number;
  health: { host: string; port: number };
  logLevel: z.output<typeof schema>['LOG_LEVEL'];
  /** Undefined: every replica runs the controllers (LEADER_ELECTION=false). */
  leaderElection: LeaderElectionSettings | undefined;
}

export function controllersSettings(env: NodeJS.ProcessEnv): ControllersSettings {
  const given = parseEnv(schema, env);
  const type = given.DATASTORE_TYPE;
  const kubeconfig = given.KUBECONFIG;
  const { etcd: datastore, deprecation } = etcdFromEnvironment(given);
  return {
    datastore: { ...datastore, datastore_type: type, ...(type === 'kubernetes' && kubeconfig ? { kubernetes: { kubeconfig } } : {}) },
    ...(type === 'etcdv3' && deprecation ? { etcdDeprecation: deprecation } : {}),
    kubeconfig,
    enabled: new Set(given.ENABLED_CONTROLLERS.filter((name) => type === 'etcdv3' || !ETCD_ONLY_CONTROLLERS.has(name))),
    ignored: given.ENABLED_CONTROLLERS.filter((name) => type !== 'etcdv3' && ETCD_ONLY_CONTROLLERS.has(name)),
    leakGraceMs: given.LEAK_GRACE_PERIOD,
    health: given.NETPLUG_CONTROLLERS_HEALTH_ADDR,
    logLevel: given.LOG_LEVEL,
    leaderElection: leaderElectionSettings(given),
  };
}
