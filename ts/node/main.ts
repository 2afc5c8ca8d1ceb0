// netplug-node, the node agent (the DaemonSet's first container): subsystems that main only wires,
// on the resident programs' runtime (ts/runtime/: one manager with the health checks, metrics,
// shared informers and controllers):
// - startup/: the files the CNI plugin reads, ClusterInformation, the default pool, the node's
//   registration and labels, host-local's pod CIDRs;
// - pool-usage/: IPAM usage per pool on /metrics;
// - cni/: the CNI service on the agent's socket (FAST_PATH);
// and with NETPLUG_NETWORKING_BACKEND=routes:
// - addresses/: the node's tunnel addresses and published addresses (datastore writes only);
// - routes/: routes to other nodes' pods (the kernel only);
// - nat/: natOutgoing, the `nat` part of netplug's nftables table `inet netplug`;
// and with NETPLUG_POLICY_ENFORCEMENT=true:
// - policy/: network policy, the `policy` part of that table, endpoint status files, and its part
//   in the CNI service's ADDs.
// What they share (the followed cluster, the node's address, the table) is in shared/. Serves
// /livez, /readyz and /metrics, and /readiness as /readyz: netconfs' readiness_gates name it.
import { AppsV1Api } from '@kubernetes/client-node';

import { netplugIsBeingRemoved } from '../install/uninstall.ts';
import { describeError } from '../runtime/errors.ts';
import { programLog } from '../runtime/log.ts';
import { Manager } from '../runtime/manager.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { nodeAddresses } from './addresses/addresses.ts';
import { cniService } from './cni/cni-service.ts';
import { NAT_PART, natOutgoing } from './nat/nat.ts';
import { networkPolicy, POLICY_PART } from './policy/policy.ts';
import { poolUsage } from './pool-usage/pool-usage.ts';
import { routesToOtherNodes } from './routes/routes.ts';
import { keptTablePath, netplugTable, removeEndpointStatusFiles, removeNetplugTable } from './shared/netplug-table.ts';
import { closeNodeParts, openNodeParts } from './shared/node-parts.ts';
import { nodeSettings, type NodeSettings } from './shared/settings.ts';
import type { NodeParts, Subsystem } from './shared/subsystem.ts';
import { LocalAddress } from './shared/this-node.ts';
import { checkDefaultPool } from './startup/ensure-default-pool.ts';
import { keepFiles, startUp } from './startup/start-up.ts';

const PROGRAM = 'netplug-node';

/**
 * Runs netplug-node until `signal` aborts; resolves to the exit code (0 after a clean stop).
 * `informers.watchTimeoutMs`: the quiet-watch timeout (client-node's 30 s), which tests shorten.
 */
export async function runNodeMain(
  _argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  informers: { watchTimeoutMs?: number } = {},
): Promise<number> {
  const write = (text: string) => process.stderr.write(text);
  let log = programLog(PROGRAM, write);
  let settings: NodeSettings;
  try {
    settings = nodeSettings(env);
    log = programLog(PROGRAM, write, settings.logLevel);
    checkDefaultPool(settings);
  } catch (err) {
    log.error(describeError(err));
    return 1;
  }
  log.info(`starting ${NETPLUG_VERSION} on node "${settings.nodeName}", datastore ${settings.datastoreType}`);
  if (settings.etcdDeprecation) log.warning(settings.etcdDeprecation);
  if (!keepFiles(settings, log)) return 1;
  const health = { ...settings.health, aliases: { '/readiness': '/readyz' } as const };
  const manager = new Manager({ log, health, informers, ...(settings.metrics ? { metricsAddress: settings.metrics } : {}) });
  let parts: NodeParts;
  try {
    parts = await openNodeParts(settings, env, log, manager);
  } catch (err) {
    log.error(`cannot reach the APIs: ${describeError(err)}`);
    return 1;
  }

  const started = startUp(parts);
  const subsystems: Subsystem[] = [started, poolUsage(parts, started.done)];
  // netplug's table holds a part of each contributor named here: NAT's with routes, policy's with enforcement.
  const contributors = [...(settings.routes ? [NAT_PART] : []), ...(settings.policyEnforcement ? [POLICY_PART] : [])];
  const table = contributors.length > 0 ? netplugTable(contributors, keptTablePath(settings.agentSocket), log) : undefined;
  // What a previous run with more parts left: the table the writer would not make equal its
  // description (there is none), and the status files policy wrote.
  await removeLeftovers(settings, table === undefined, log);
  if (table && settings.routes) {
    const { informers, kube } = parts;
    const address = new LocalAddress({
      setting: settings.nodeAddress,
      setting6: settings.nodeAddress6,
      name: settings.nodeName,
      log,
      informers,
      kube,
    });
    subsystems.push(nodeAddresses(parts, address, started.done), routesToOtherNodes(parts, address, started.done));
    subsystems.push(natOutgoing(parts, table, started.done));
  } else if (!settings.routes)
    log.info('NETPLUG_NETWORKING_BACKEND=none: routing between nodes is left to the cluster; no routes, tunnels or natOutgoing here');
  const policy = table && settings.policyEnforcement ? networkPolicy(parts, table) : undefined;
  if (policy) subsystems.push(policy);
  // Other subsystems' part in CNI calls: policy's, once an ADD has planned its addresses and networked its pod.
  subsystems.push(cniService(parts, policy?.callHooks ?? {}));

  // The subsystems stop first (the CNI service waits for the calls it serves), then the manager.
  const failed = new AbortController();
  const stopping = new AbortController();
  const managed = manager.run(stopping.signal).finally(() => failed.abort());
  await Promise.all(subsystems.map((subsystem) => subsystem.run(AbortSignal.any([signal, failed.signal]))));
  stopping.abort();
  const code = await managed;
  await table?.close();
  if (signal.aborted && settings.podNamespace) await removeWithNetplug(settings, settings.podNamespace, parts, log);
  closeNodeParts(parts);
  log.info('stopped');
  return code;
}

/**
 * Deletes what parts this run does not have left on the node. A failure is logged, not fatal: the
 * agent's other work (addresses, the CNI service) does not depend on it.
 */
async function removeLeftovers(settings: NodeSettings, noTable: boolean, log: ReturnType<typeof programLog>): Promise<void> {
  try {
    if (noTable && (await removeNetplugTable())) log.info('deleted nftables table inet netplug: no part of the agent writes it');
    if (!settings.policyEnforcement) {
      const removed = removeEndpointStatusFiles(settings.endpointStatusPathPrefix);
      if (removed.length > 0) log.info(`deleted ${removed.length} endpoint status files: policy enforcement is off`);
    }
  } catch (err) {
    log.error(`cannot delete what a previous run left: ${describeError(err)}`);
  }
}

/**
 * Stopped because netplug is being removed from the cluster (its DaemonSet gone or being deleted,
 * as install-cni decides): no agent will keep netplug's table after this one, and its policy part
 * would pass nothing to or from a pod it does not know. The table and the status files go with netplug.
 */
async function removeWithNetplug(settings: NodeSettings, namespace: string, parts: NodeParts, log: ReturnType<typeof programLog>) {
  const kube = { apps: parts.kube.makeApiClient(AppsV1Api), namespace };
  const outcomes = { removing: "deleting netplug's nftables table", keeping: "keeping netplug's nftables table" };
  try {
    if (!(await netplugIsBeingRemoved(kube, log, outcomes))) return;
    if (await removeNetplugTable()) log.info('deleted nftables table inet netplug: netplug is being removed');
    const removed = removeEndpointStatusFiles(settings.endpointStatusPathPrefix);
    if (removed.length > 0) log.info(`deleted ${removed.length} endpoint status files: netplug is being removed`);
  } catch (err) {
    log.error(`cannot delete netplug's nftables table: ${describeError(err)}`);
  }
}
