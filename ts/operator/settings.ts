// netplug-operator's settings, from its environment, parsed by one schema (runtime/settings.ts): a
// bad value stops the program with a line naming the variable and its value. NETPLUG_IMAGE is what
// netplug-system's containers run; the NETPLUG_NODE_* / NETPLUG_CNI_LOG_FILE / NETPLUG_AGENT_SOCKET
// paths move netplug's files on nodes whose layout is not the standard one.
// Replicas elect a leader on Lease netplug-operator in the operator's namespace (OPERATOR_NAMESPACE,
// which the manifest sets to the pod's), LEADER_ELECTION on by default.
import * as z from 'zod/mini';

import { IMAGE_REPOSITORY, type NodeLayout, STANDARD_NODE_LAYOUT } from '../render/objects.ts';
import { OPERATOR, OPERATOR_HEALTH_PORT } from '../render/operator.ts';
import { type LeaderElectionSettings, leaderElectionSchema, leaderElectionSettings } from '../runtime/leader-election.ts';
import { LOG_LEVEL } from '../runtime/log.ts';
import { hostPort, Invalid, parseEnv, setting, text } from '../runtime/settings.ts';
import { NETPLUG_VERSION } from '../version.ts';

/** A path on the nodes: absolute, without "..". */
const hostPath = (fallback: string) =>
  setting((given) => {
    if (!given.startsWith('/') || given.split('/').includes('..')) throw new Invalid('must be an absolute host path without ".."');
    return given;
  }, fallback);

const schema = z.object({
  KUBECONFIG: text(),
  NETPLUG_IMAGE: setting((given) => given, `${IMAGE_REPOSITORY}:${NETPLUG_VERSION}`),
  NETPLUG_NODE_STATE_DIR: hostPath(STANDARD_NODE_LAYOUT.stateDir),
  NETPLUG_CNI_LOG_FILE: hostPath(STANDARD_NODE_LAYOUT.cniLogFile),
  NETPLUG_AGENT_SOCKET: hostPath(STANDARD_NODE_LAYOUT.agentSocket),
  NETPLUG_OPERATOR_HEALTH_ADDR: hostPort(`0.0.0.0:${OPERATOR_HEALTH_PORT}`),
  LOG_LEVEL,
  OPERATOR_NAMESPACE: text(),
  ...leaderElectionSchema(OPERATOR),
});

export interface OperatorSettings {
  /** The image netplug-system's containers run. */
  image: string;
  /** Where netplug's files live on the nodes. */
  node: NodeLayout;
  /** Where /livez, /readyz and /metrics are served. */
  health: { host: string; port: number };
  logLevel: z.output<typeof schema>['LOG_LEVEL'];
  /** Undefined: every replica reconciles (LEADER_ELECTION=false). */
  leaderElection: LeaderElectionSettings | undefined;
}

export function operatorSettings(env: NodeJS.ProcessEnv): OperatorSettings {
  const given = parseEnv(schema, env);
  return {
    image: given.NETPLUG_IMAGE,
    node: {
      stateDir: given.NETPLUG_NODE_STATE_DIR,
      cniLogFile: given.NETPLUG_CNI_LOG_FILE,
      agentSocket: given.NETPLUG_AGENT_SOCKET,
    },
    health: given.NETPLUG_OPERATOR_HEALTH_ADDR,
    logLevel: given.LOG_LEVEL,
    leaderElection: leaderElectionSettings(given, given.OPERATOR_NAMESPACE),
  };
}
