// netplug-node run in this process (runNodeMain), as the DaemonSet runs it, with a temporary
// NETPLUG_VAR_DIR and a free health port; stopped (and its exit code checked) at teardown. Also
// the RBAC rules the agent needs, which the tests give its identity and nothing more.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { runNodeMain } from '../../ts/node/main.ts';
import { tempDir } from '../helpers/cni.ts';
import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';

/** On every datastore: the Node it follows (etcd), its pods, and kubeadm's record of the pod CIDR. */
export const NODE_AGENT_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] },
  // Its node's pods and the namespaces, for the ADDs it serves (ts/node/cni/watch-pods.ts).
  { apiGroups: [''], resources: ['pods', 'namespaces'], verbs: ['list', 'watch'] },
  { apiGroups: [''], resources: ['configmaps'], resourceNames: ['kubeadm-config'], verbs: ['get'] },
];

/** Besides, on the Kubernetes datastore: ClusterInformation, the default pool, and its release recorded on its Node. */
export const NODE_AGENT_DATASTORE_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: ['crd.projectnet.org'], resources: ['clusterinformations'], verbs: ['get', 'create', 'update'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['ippools'], verbs: ['list', 'create'] },
  { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'patch'] },
];

export interface Agent {
  varDir: string;
  health: string;
  /** Aborts the agent and resolves to its exit code. */
  stop(): Promise<number>;
}

/** `informers.watchTimeoutMs` shortens client-node's 30 s quiet-watch timeout. */
export async function startAgent(
  t: Pick<ExecutionContext, 'teardown'>,
  env: Record<string, string>,
  informers: { watchTimeoutMs?: number } = {},
): Promise<Agent> {
  const varDir = join(tempDir(t, 'node'), 'var');
  const port = await freePort();
  const controller = new AbortController();
  // In the host's own namespace: no routes, tunnels or NAT rules (test/node/routes.test.ts runs agents in namespaces of their own).
  const running = runNodeMain(
    [],
    {
      NETPLUG_VAR_DIR: varDir,
      NETPLUG_HEALTH_ADDR: `127.0.0.1:${port}`,
      NETPLUG_NETWORKING_BACKEND: 'none',
      // Its CNI socket in the test's directory, never the host's /var/run/netplug/ (other tests' shims would find it).
      NETPLUG_AGENT_SOCKET: join(varDir, '..', 'run', 'cni.sock'),
      ...env,
    },
    controller.signal,
    informers,
  );
  const stop = () => {
    controller.abort();
    return running;
  };
  t.teardown(stop);
  return { varDir, health: `http://127.0.0.1:${port}`, stop };
}

/** The status and body of GET `path` on the agent's health server. */
export async function probe(agent: Agent, path: string): Promise<{ status: number; text: string }> {
  try {
    const response = await fetch(`${agent.health}${path}`, { signal: AbortSignal.timeout(5_000) });
    return { status: response.status, text: await response.text() };
  } catch (err) {
    return { status: 0, text: (err as Error).message };
  }
}

export const ready = (agent: Agent) => eventually('the agent is ready', async () => (await probe(agent, '/readyz')).status === 200);

export const readVarFile = (agent: Agent, name: string) => readFileSync(join(agent.varDir, name), 'utf8');
