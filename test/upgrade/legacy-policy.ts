// A NetworkPolicy the previous release never enforced, across a real upgrade (tool-e2e.ts, on
// both datastores): namespace legacy-policy with two busybox servers, `kept` and `cut`, a client,
// and a Kubernetes NetworkPolicy denying every ingress to the servers. v3.30.0 has no policy
// agent: the client reaches both. `netplugctl upgrade` creates allow-all-upgrade before this
// release's netplug-node starts, so the client still reaches both after the upgrade (real
// packets). Then, on the Kubernetes datastore, docs/upgrade.md's step as written: flow logs on,
// `netplugctl flows --policy allow-all-upgrade` showing both connections, a global policy for the
// one the logs call for (client → kept), allow-all-upgrade deleted: kept answers, cut is refused.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';

import { docsBlocks } from '../docs/command-blocks.ts';
import { type DocsShell, runCommands } from '../docs/docs-shell.ts';
import { eventually, NETPLUGCTL } from '../e2e/install.ts';
import { clientPod, networkPolicy, policyProbes, serverPod } from '../e2e/policy-probes.ts';
import { apply, type Cluster } from '../helpers/cluster.ts';
import { nftBinary } from '../helpers/kernel.ts';
import { type PreviousInstall, runNetplugctl } from './install-previous.ts';

const NAMESPACE = 'legacy-policy';
const DOCS_SECTION = 'Review and delete allow-all-upgrade';
/** The file the page's step applies: the policies the flow logs call for. */
const REVIEWED_FILE = 'allow-reviewed.yaml';

/** Starts the servers and the client, applies the NetworkPolicy, and checks that v3.30.0 lets both connections through. */
export async function startLegacyPolicy(t: ExecutionContext, cluster: Cluster): Promise<void> {
  const started = Date.now();
  await cluster.kubectl('create', 'namespace', NAMESPACE);
  await apply(cluster, serverPod(NAMESPACE, 'kept', 'kept'), serverPod(NAMESPACE, 'cut', 'cut'), clientPod(NAMESPACE));
  await cluster.kubectl('-n', NAMESPACE, 'wait', '--for=condition=Ready', 'pod/kept', 'pod/cut', 'pod/client', '--timeout=180s');
  await apply(
    cluster,
    networkPolicy(NAMESPACE, 'servers-deny-ingress', { podSelector: { matchLabels: { app: 'server' } }, policyTypes: ['Ingress'] }),
  );
  const probes = policyProbes(() => cluster, NAMESPACE);
  t.true(await probes.settles('kept', true), `v3.30.0 enforces nothing: client → kept (${probes.lastFailure})`);
  t.true(await probes.settles('cut', true), `v3.30.0 enforces nothing: client → cut (${probes.lastFailure})`);
  t.log(`namespace ${NAMESPACE} with its NetworkPolicy, unenforced by v3.30.0, in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** After the upgrade: allow-all-upgrade in the datastore, both connections still flowing. */
export async function checkAllowAllUpgradeKept(t: ExecutionContext, cluster: Cluster, installed: PreviousInstall): Promise<void> {
  const started = Date.now();
  const got = await runNetplugctl(cluster, installed, NETPLUGCTL, 'get', 'globalnetworkpolicy', 'allow-all-upgrade', '-o', 'json');
  const policy = JSON.parse(got);
  t.deepEqual(
    policy.spec.ingress.map((rule: { action: string }) => rule.action),
    ['Log', 'Allow'],
  );
  t.deepEqual(policy.spec.types, ['Ingress', 'Egress']);
  // netplug-node programmed it (its rules' comments name policy, direction and rule): what lets cut's traffic through is the policy.
  await eventually(
    "allow-all-upgrade's Allow rules in the node's inet netplug",
    async () => {
      const table = await cluster.inNode(nftBinary(), ['list', 'table', 'inet', 'netplug']).catch(() => '');
      return table.includes('allow-all-upgrade ingress rule 1') && table.includes('allow-all-upgrade egress rule 1') ? true : undefined;
    },
    60,
  );
  const probes = policyProbes(() => cluster, NAMESPACE);
  t.true(await probes.settles('kept', true), `after the upgrade, client → kept (${probes.lastFailure})`);
  t.true(await probes.settles('cut', true), `after the upgrade, client → cut, which the NetworkPolicy denies (${probes.lastFailure})`);
  t.log(`allow-all-upgrade in the datastore, both connections flowing: checked in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** The page's blocks of the step: flow logs on, the review, the policies added and allow-all-upgrade deleted. */
function stepBlocks(): { flowLogs: string[]; review: string[]; finish: string[] } {
  const blocks = docsBlocks('upgrade.md', DOCS_SECTION);
  const find = (what: string) => {
    const found = blocks.filter((commands) => commands.some((command) => command.includes(what)));
    if (found.length !== 1) throw new Error(`docs/upgrade.md "${DOCS_SECTION}": ${found.length} blocks with ${what}`);
    return found[0] as string[];
  };
  return { flowLogs: find('flow_logs'), review: find('flows --policy allow-all-upgrade'), finish: find('delete globalnetworkpolicy') };
}

/** docs/upgrade.md's step, run as written in the docs shell, checked with real packets. */
export async function reviewAndDeleteAllowAllUpgrade(t: ExecutionContext, cluster: Cluster, shell: DocsShell): Promise<void> {
  const { flowLogs, review, finish } = stepBlocks();
  const probes = policyProbes(() => cluster, NAMESPACE);
  let started = Date.now();
  await runCommands(t, shell, flowLogs);
  t.log(`flow logs on in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  // Connections made with flow logs on, until the page's command shows both, decided by allow-all-upgrade.
  started = Date.now();
  const shown = await eventually(
    'netplugctl flows --policy allow-all-upgrade showing client → kept and client → cut',
    async () => {
      await probes.reaches('kept');
      await probes.reaches('cut');
      const table = await shell.run(review.join('\n'));
      const lines = table.split('\n').filter((line) => line.includes(`${NAMESPACE}/client`));
      const to = (server: string) =>
        lines.some((line) => new RegExp(`${NAMESPACE}/${server}:80\\s+TCP\\s+\\w+\\s+Allow\\s+allow-all-upgrade\\s`).test(line));
      return to('kept') && to('cut') ? table : undefined;
    },
    120,
  );
  t.log(`$ ${review.join('\n$ ')}\n${shown.trimEnd()}\nboth connections shown in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  // The review's outcome: client → kept is wanted, client → cut is what the NetworkPolicy meant to stop.
  writeFileSync(
    join(shell.dir, REVIEWED_FILE),
    `apiVersion: projectnet.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: allow-client-to-kept
spec:
  order: 500
  selector: projectnet.org/namespace == '${NAMESPACE}' && role == 'kept'
  types: [Ingress]
  ingress:
    - action: Allow
      protocol: TCP
      source: {selector: app == 'client'}
      destination: {ports: [80]}
`,
  );
  const outputs = await runCommands(t, shell, finish);
  t.regex(outputs.join(''), /GlobalNetworkPolicy "allow-client-to-kept" created/);
  t.regex(outputs.join(''), /GlobalNetworkPolicy "allow-all-upgrade" deleted/);
  t.true(await probes.settles('kept', true), `the reviewed policy lets client → kept through (${probes.lastFailure})`);
  t.true(await probes.settles('cut', false), 'without allow-all-upgrade the NetworkPolicy refuses client → cut');
}
