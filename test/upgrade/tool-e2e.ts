// netplugctl upgrade under the real kubelet, one procedure per test file: v3.30.0 installed as its
// README says (installPrevious), a workload running and probed; `upgrade plan`; `upgrade apply
// --yes` of the built executable killed with SIGKILL once during each of its steps and run again
// until a run completes; the issue's checks (checkAfterUpgrade); `status`; a second apply that does
// nothing; `rollback`, after which v3.30.0 runs again (enforcement turned off first: v3.30.0 has
// no network policy) and a pod created then gets traffic. On both manifest datastores a
// NetworkPolicy v3.30.0 never enforced is there too: the upgrade creates allow-all-upgrade, and on
// the Kubernetes datastore the page's review of it is run as written (legacy-policy.ts).
// The plan, apply, status and rollback commands are docs/upgrade.md's, run as written in the docs
// shell (test/docs/docs-shell.ts); host-local, which the page covers in words only, keeps its own.
// A procedure may run on a cluster of several nodes (`nodes`): the DaemonSet then rolls node by
// node, the workload is spread over the nodes and pings cross them (workload.ts), and while some
// nodes run this release and others v3.30.0, `netplugctl version` and `upgrade status` must list
// each node's release and keep the cluster's version at v3.30.0 (watchMixedRollout).
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

import type { ExecutionContext, TestFn } from 'ava';

import { CHART_VERSION } from '../../scripts/lib/chart-files.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { helmBinary } from '../chart/helm.ts';
import { docsBlocks } from '../docs/command-blocks.ts';
import { type DocsShell, docsShell, runCommands } from '../docs/docs-shell.ts';
import { imageArchive, NETPLUGCTL } from '../e2e/install.ts';
import { type Cluster, clusterPerFile, getJson } from '../helpers/cluster.ts';
import {
  installPrevious,
  manifestWithNodePaths,
  operatorManifestWithNodePaths,
  type PreviousInstall,
  runNetplugctl,
} from './install-previous.ts';
import { checkAllowAllUpgradeKept, reviewAndDeleteAllowAllUpgrade, startLegacyPolicy } from './legacy-policy.ts';
import { Whereabouts, withinLimit } from './overrun-report.ts';
import {
  checkAfterUpgrade,
  checkNewPodGetsTraffic,
  describeRollout,
  routePodBlocksThroughout,
  snapshotAddresses,
  startRolloutProbes,
  startWorkload,
} from './workload.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const MANIFESTS = join(ROOT, 'deploy/manifests');

export type ToolMethod = 'manifest-kdd' | 'manifest-etcd' | 'host-local' | 'operator' | 'helm';

/** How netplugctl is run for a procedure: its flags, where (etcd listens inside the node only), with which environment. */
interface Invocation {
  flags: string[];
  wrap: (command: string, args: string[]) => [string, string[]];
  env: NodeJS.ProcessEnv;
}

function invocation(cluster: Cluster, installed: PreviousInstall, method: ToolMethod): Invocation {
  const outside = { wrap: (command: string, args: string[]): [string, string[]] => [command, args], env: { ...process.env } };
  if (method !== 'operator' && method !== 'helm') {
    const file = { 'manifest-kdd': 'netplug.yaml', 'manifest-etcd': 'netplug-etcd.yaml', 'host-local': 'netplug-host-local.yaml' }[method];
    const manifest = manifestWithNodePaths(cluster, join(MANIFESTS, file), installed.paths, installed.configData, `v3.31-${file}`);
    const files = ['--manifest', manifest, '--crds', join(MANIFESTS, 'crds.yaml')];
    if (method !== 'manifest-etcd') return { ...outside, flags: ['--kubeconfig', cluster.kubeconfig, ...files] };
    // etcd (netplug-config's etcd_endpoints, the node's address) is reachable inside the node only.
    return {
      flags: ['--kubeconfig', cluster.nodeKubeconfig, ...files],
      wrap: (command, args) => ['nsenter', [`--net=${cluster.netnsPath}`, '--', command, ...args]],
      env: { ...process.env },
    };
  }
  const crds = ['--operator-crds', join(MANIFESTS, 'operator-crds.yaml')];
  if (method === 'operator') {
    const operator = operatorManifestWithNodePaths(
      cluster,
      join(MANIFESTS, 'netplug-operator.yaml'),
      installed.paths,
      'v3.31-netplug-operator.yaml',
    );
    return { ...outside, flags: ['--kubeconfig', cluster.kubeconfig, ...crds, '--operator-manifest', operator] };
  }
  const charts = join(cluster.dir, 'v3.31-charts');
  execFileSync(process.execPath, [join(ROOT, 'scripts/build-chart.ts'), '--out', charts], { stdio: 'ignore' });
  const home = join(cluster.dir, 'helm-home');
  mkdirSync(home, { recursive: true });
  return {
    ...outside,
    flags: [
      '--kubeconfig',
      cluster.kubeconfig,
      ...crds,
      '--chart',
      join(charts, `netplug-operator-${CHART_VERSION}.tgz`),
      '--helm',
      helmBinary(),
    ],
    env: {
      ...process.env,
      HOME: home,
      HELM_CACHE_HOME: join(home, 'cache'),
      HELM_CONFIG_HOME: join(home, 'config'),
      HELM_DATA_HOME: join(home, 'data'),
    },
  };
}

async function netplugctl(how: Invocation, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const [command, argv] = how.wrap(NETPLUGCTL, args);
  try {
    const { stdout, stderr } = await run(command, argv, { maxBuffer: 16 << 20, env: how.env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/** The netplugctl upgrade commands of docs/upgrade.md for a method, as written. */
interface DocsProcedure {
  shell: DocsShell;
  /** The commands before `upgrade plan` (writing the etcd manifest), then plan, apply, status. */
  before: string[];
  plan: string;
  apply: string;
  status: string;
  rollback: string;
}

const DOCS_SECTION = 'Upgrade with netplugctl';

/** The section's one block that `matches`. */
function docsBlock(matches: (commands: string[]) => boolean, what: string): string[] {
  const found = docsBlocks('upgrade.md', DOCS_SECTION).filter(matches);
  if (found.length !== 1) throw new Error(`docs/upgrade.md "${DOCS_SECTION}": ${found.length} blocks for ${what}`);
  return found[0] as string[];
}

/**
 * The page's commands for `method`, in a docs shell whose files are the ones `how` names (the
 * etcd manifest with its placeholder, which the page's sed fills from ETCD_ENDPOINTS).
 */
function docsProcedure(
  cluster: Cluster,
  installed: PreviousInstall,
  method: Exclude<ToolMethod, 'host-local'>,
  how: Invocation,
): DocsProcedure {
  const flag = (name: string) => how.flags[how.flags.indexOf(name) + 1] as string;
  const signature = {
    'manifest-kdd': '--manifest deploy/manifests/netplug.yaml',
    'manifest-etcd': '--manifest netplug-etcd.yaml',
    operator: '--operator-manifest deploy/manifests/netplug-operator.yaml',
    helm: '--chart dist/charts/',
  }[method];
  const block = docsBlock((commands) => commands.some((command) => command.includes(signature)), method);
  const find = (verb: string) => {
    const index = block.findIndex((command) => command.includes(`netplugctl upgrade ${verb} `));
    if (index < 0) throw new Error(`docs/upgrade.md: no netplugctl upgrade ${verb} for ${method}`);
    return index;
  };
  const [rollback] = docsBlock((commands) => commands.some((command) => command.includes('netplugctl upgrade rollback')), 'rollback');
  // dist/ is rebuilt whole by `npm run build`: the page's dist/bin is a copy of this release's netplugctl (and addon).
  const distBin = join(cluster.dir, 'this-release-bin');
  mkdirSync(distBin, { recursive: true });
  for (const name of readdirSync(dirname(NETPLUGCTL)).filter((name) => name === 'netplugctl' || name.endsWith('.node')))
    copyFileSync(join(dirname(NETPLUGCTL), name), join(distBin, name));
  let shell: DocsShell;
  if (method === 'manifest-kdd') shell = docsShell(cluster, { distBin, manifests: { 'netplug.yaml': flag('--manifest') } });
  else if (method === 'manifest-etcd') {
    const { etcd_endpoints: endpoints, ...data } = installed.configData;
    const manifest = manifestWithNodePaths(
      cluster,
      join(MANIFESTS, 'netplug-etcd.yaml'),
      installed.paths,
      data,
      'docs-v3.31-netplug-etcd.yaml',
    );
    shell = docsShell(cluster, {
      distBin,
      manifests: { 'netplug-etcd.yaml': manifest },
      ...(endpoints ? { etcdEndpoints: endpoints } : {}),
    });
  } else if (method === 'operator')
    shell = docsShell(cluster, { distBin, manifests: { 'netplug-operator.yaml': flag('--operator-manifest') } });
  else shell = docsShell(cluster, { distBin, distCharts: dirname(flag('--chart')) });
  return {
    shell,
    before: block.slice(0, find('plan')),
    plan: block[find('plan')] as string,
    apply: block[find('apply')] as string,
    status: block[find('status')] as string,
    rollback: rollback as string,
  };
}

/** A command of the page run as written, with netplugctl()'s result shape; the message names the command and its exit. */
async function viaDocs(shell: DocsShell, command: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    return { code: 0, stdout: await shell.run(command), stderr: '' };
  } catch (err) {
    return { code: 1, stdout: '', stderr: err instanceof Error ? err.message : String(err) };
  }
}

/** A way to start `netplugctl upgrade apply` and to kill it whole. */
interface Starter {
  start: () => ChildProcess;
  kill: (child: ChildProcess) => void;
}

export interface KilledApply {
  /** Runs, the last one complete. */
  runs: number;
  /** The steps each kill interrupted, in order (`3/5 apply-manifest (recorded running)`). */
  killed: string[];
}

/**
 * `netplugctl upgrade apply --yes` run until it exits 0, each run killed (SIGKILL) as soon as it
 * announces a step no earlier run was killed in: every step is interrupted once, and the record
 * must then say that step is running (or done, when it finished before the signal landed).
 */
async function applyKilledAtEachStep(
  t: ExecutionContext,
  cluster: Cluster,
  namespace: string,
  starter: Starter,
  where: Whereabouts,
): Promise<KilledApply> {
  const killedSteps = new Set<number>();
  const killed: string[] = [];
  for (let runs = 1; runs <= 12; runs++) {
    const child = starter.start();
    let out = '';
    let err = '';
    where.enter(`netplugctl upgrade apply, run ${runs}`, () => out + err);
    let killedAt: string | undefined;
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (killedAt) return;
      for (const match of out.matchAll(/^\[(\d+)\/(\d+)\] /gm)) {
        const step = Number(match[1]);
        if (killedSteps.has(step)) continue;
        killedSteps.add(step);
        killedAt = `${step}/${match[2]}`;
        starter.kill(child);
        break;
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    if (killedAt && (exit.signal === 'SIGKILL' || exit.code === 137)) {
      const map = JSON.parse(await cluster.kubectl('-n', namespace, 'get', 'configmap', 'netplug-upgrade', '-o', 'json'));
      const record = JSON.parse(map.data['record.json']);
      const id = record.steps[Number(killedAt.split('/')[0]) - 1].id;
      const state = record.progress[id].state;
      killed.push(`${killedAt} ${id} (recorded ${state})`);
      t.log(`run ${runs}: SIGKILL during step ${killedAt} ${id}; the record says it is ${state}`);
      t.true(['running', 'done'].includes(state), `${id} is recorded as started`);
      continue;
    }
    if (exit.code !== 0) throw new Error(`netplugctl upgrade apply exited ${exit.code ?? exit.signal}: ${err.trim() || out.trim()}`);
    t.log(`run ${runs}: complete\n${out}`);
    return { runs, killed };
  }
  throw new Error('netplugctl upgrade apply did not complete in 12 runs');
}

const escaped = (text: string) => text.replaceAll('.', '\\.');

/** The release each node runs, from its netplug-node pods. */
interface NodeReleases {
  /** Nodes whose pod of this release runs, Ready, not being deleted. */
  upgraded: Set<string>;
  /** Nodes with no pod of this release at all yet: their v3.30.0 pod runs (or is being deleted). */
  previous: Set<string>;
}

async function nodeReleases(cluster: Cluster, namespace: string): Promise<NodeReleases> {
  const pods = (await getJson(cluster, '-n', namespace, 'pods', '-l', 'k8s-app=netplug-node')).items as any[];
  const current = (pod: any) => pod.spec.containers.every((x: any) => x.image === `localhost/netplug:${NETPLUG_VERSION}`);
  const ready = (pod: any) =>
    pod.status?.phase === 'Running' && !pod.metadata.deletionTimestamp && pod.status.containerStatuses?.every((x: any) => x.ready);
  const upgraded = new Set<string>(pods.filter((pod) => current(pod) && ready(pod)).map((pod) => pod.spec.nodeName));
  const started = new Set<string>(pods.filter(current).map((pod) => pod.spec.nodeName));
  return { upgraded, previous: new Set(cluster.nodes.map((node) => node.name).filter((name) => !started.has(name))) };
}

/**
 * While the apply runs, watches the node pods for a moment when some nodes run this release and
 * others still v3.30.0; then reads `netplugctl version` and `upgrade status` and, if a node still
 * had no pod of this release after both (so throughout), checks what they said: each upgraded
 * node records this release, each other none, both at their pods' releases, and the cluster's
 * version is v3.30.0, the lowest. stop() ends the watch and says how often it checked.
 */
function watchMixedRollout(
  t: ExecutionContext,
  cluster: Cluster,
  installed: PreviousInstall,
  how: Invocation,
): { stop: () => Promise<number> } {
  let stopping = false;
  let checked = 0;
  const loop = (async () => {
    while (!stopping && checked === 0) {
      const before = await nodeReleases(cluster, installed.namespace);
      if (before.upgraded.size > 0 && before.previous.size > 0) {
        const version = JSON.parse(await runNetplugctl(cluster, installed, NETPLUGCTL, 'version', '-o', 'json'));
        const status = await netplugctl(how, 'upgrade', 'status', '-o', 'json', ...how.flags.slice(0, 2));
        const after = await nodeReleases(cluster, installed.namespace);
        const previous = [...before.previous].filter((name) => after.previous.has(name));
        if (previous.length > 0) {
          checked++;
          t.is(status.code, 0, status.stderr);
          const report = JSON.parse(status.stdout);
          const recorded = new Map<string, string | null>(version.nodes.map((node: any) => [node.name, node.version]));
          const shown = new Map<string, any>(report.nodes.map((node: any) => [node.node, node]));
          t.log(
            `mid-rollout: ${NETPLUG_VERSION} runs on ${[...before.upgraded].join(', ')}, v3.30.0 on ${previous.join(', ')}; ` +
              `netplugctl version: cluster ${version.clusterVersion}, ${[...recorded].map(([name, v]) => `${name} ${v ?? '(none recorded)'}`).join(', ')}; ` +
              `upgrade status: ${report.nodes.map((node: any) => `${node.node} ${node.version} (recorded ${node.recordedVersion ?? 'none'})`).join(', ')}`,
          );
          t.is(version.clusterVersion, 'v3.30.0', 'the cluster version is the lowest a node runs while some nodes still run v3.30.0');
          t.is(report.clusterVersion, 'v3.30.0', 'upgrade status: the cluster version v3.30.0');
          t.deepEqual([...recorded.keys()].sort(), cluster.nodes.map((node) => node.name).sort(), 'netplugctl version lists every node');
          for (const name of before.upgraded) {
            t.is(recorded.get(name), NETPLUG_VERSION, `${name} records ${NETPLUG_VERSION}`);
            t.is(shown.get(name)?.recordedVersion, NETPLUG_VERSION, `upgrade status: ${name} records ${NETPLUG_VERSION}`);
          }
          for (const name of previous) {
            t.is(recorded.get(name), null, `${name}, on v3.30.0, records no release`);
            t.is(shown.get(name)?.version, 'v3.30.0', `upgrade status: ${name}'s pod runs v3.30.0`);
            t.is(shown.get(name)?.recordedVersion, null, `upgrade status: ${name} records no release`);
          }
        }
      }
      // Polling the pods; nothing waits on it.
      if (!stopping && checked === 0) await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  })();
  // Awaited by stop(); not unhandled meanwhile.
  loop.catch(() => undefined);
  return {
    async stop() {
      stopping = true;
      await loop;
      return checked;
    },
  };
}

export function toolUpgrade(test: TestFn, method: ToolMethod, options: { nodes?: number } = {}): void {
  // On several nodes the router routes the pods' blocks, as v3.30.0 needs (workload.ts); stopped before the cluster is.
  let underlay: { stop: () => Promise<void> } | undefined;
  test.after.always(async () => {
    await underlay?.stop();
  });
  const cluster = clusterPerFile(test, { systemPlugins: false, nodes: options.nodes ?? 1 });
  let installed: PreviousInstall | undefined;
  let how: Invocation | undefined;
  // The page's commands for this method (docs/upgrade.md); host-local has no block of its own.
  let docs: DocsProcedure | undefined;
  let upgraded = false;
  const nodeDaemonSet = () => getJson(cluster(), '-n', installed?.namespace ?? 'kube-system', 'daemonset', 'netplug-node');
  // An unenforced NetworkPolicy on each datastore; operator and helm share the step (allow-all-upgrade-plan.test.ts).
  const legacyPolicy = method === 'manifest-kdd' || method === 'manifest-etcd';
  const legacyEnv = (ds: any) => ds.spec.template.spec.containers[0].env.some((e: any) => e.name === 'NETPLUG_LEGACY_STATUS_FILE');

  test.serial(
    `${method}: plan, then apply killed once in each step and resumed, upgrades v3.30.0 to ${NETPLUG_VERSION} with the workload kept`,
    async (t) => {
      const where = new Whereabouts();
      await withinLimit(t, 9 * 60_000, cluster, where, async () => {
        const c = cluster();
        if (c.router) underlay = routePodBlocksThroughout(c, c.router);
        const installStarted = Date.now();
        where.enter(`installing v3.30.0 by ${method}`);
        installed = await installPrevious(c, method);
        t.log(`v3.30.0 installed by ${method} in ${((Date.now() - installStarted) / 1000).toFixed(1)} s`);
        where.enter('starting the workload, importing the image');
        await startWorkload(c);
        if (legacyPolicy) await startLegacyPolicy(t, c);
        await c.importImage(imageArchive());
        how = invocation(c, installed, method);
        const invoked = how;
        const page = method === 'host-local' ? undefined : docsProcedure(c, installed, method, how);
        docs = page;
        where.enter('netplugctl upgrade plan');
        if (page) await runCommands(t, page.shell, page.before);

        const plan = page ? await viaDocs(page.shell, page.plan) : await netplugctl(how, 'upgrade', 'plan', ...how.flags);
        t.log(plan.stdout);
        t.is(plan.code, 0, plan.stderr);
        const manifest = method.startsWith('manifest') || method === 'host-local';
        t.regex(plan.stdout, new RegExp(`method: ${manifest ? 'manifest' : method}`));
        t.regex(plan.stdout, new RegExp(`datastore: ${method === 'manifest-etcd' ? 'etcdv3' : 'kubernetes'}`));
        for (const node of c.nodes) t.regex(plan.stdout, new RegExp(`node ${node.name}: v3\\.30\\.0`));
        if (manifest) t.regex(plan.stdout, /kubectl-create\): .*NETPLUG_LEGACY_STATUS_FILE/);
        if (method === 'host-local')
          t.regex(plan.stdout, /1\. Host-local install: USE_POD_CIDR=true on netplug-node, the init container upgrade-ipam removed/);
        t.regex(
          plan.stdout,
          legacyPolicy
            ? /allow-all-upgrade: created before the new netplug-node starts \(v3\.30\.0 enforced no network policy, .*NetworkPolicy legacy-policy\/servers-deny-ingress/
            : /allow-all-upgrade: not needed \(no network policy or host endpoint in the cluster/,
        );
        const steps = JSON.parse((await netplugctl(how, 'upgrade', 'plan', '-o', 'json', ...how.flags)).stdout).steps.length;

        const addresses = await snapshotAddresses(c);
        const probes = await startRolloutProbes(c);
        const started = Date.now();
        const starter: Starter = page
          ? // The page's command in its own process group: the kill takes the shell and netplugctl.
            { start: () => page.shell.spawn(page.apply), kill: (child) => process.kill(-(child.pid as number), 'SIGKILL') }
          : {
              start: () => {
                // A wait that never ends gives up with netplugctl's own account of it, inside the test's limit.
                const [command, argv] = invoked.wrap(NETPLUGCTL, ['upgrade', 'apply', '--yes', '--timeout', '4m', ...invoked.flags]);
                return spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: invoked.env });
              },
              kill: (child) => child.kill('SIGKILL'),
            };
        const watch = c.nodes.length > 1 ? watchMixedRollout(t, c, installed, invoked) : undefined;
        const applied = await applyKilledAtEachStep(t, c, installed.namespace, starter, where).finally(() => watch?.stop());
        const seconds = (Date.now() - started) / 1000;
        const stats = await probes.stop();
        if (watch) t.true((await watch.stop()) > 0, 'netplugctl version and upgrade status checked while the nodes ran both releases');
        t.log(
          `${method} with netplugctl upgrade apply (${applied.runs} runs; killed in ${applied.killed.join(', ')}): ${describeRollout(seconds, stats)}`,
        );
        t.is(applied.killed.length, steps, `killed once in each of the ${steps} steps`);
        where.enter('the checks after the upgrade');
        await checkAfterUpgrade(t, c, installed, addresses, stats);
        if (legacyPolicy) await checkAllowAllUpgradeKept(t, c, installed);
        upgraded = true;

        // What the literal server-side apply leaves behind (literal-upgrade.ts), the tool pruned.
        const ds = await nodeDaemonSet();
        t.false(legacyEnv(ds), 'NETPLUG_LEGACY_STATUS_FILE is gone');
        t.is(ds.spec.template.spec.initContainers, undefined, 'no upgrade-ipam');

        const status = page ? await viaDocs(page.shell, page.status) : await netplugctl(how, 'upgrade', 'status', ...how.flags.slice(0, 2));
        t.log(status.stdout);
        t.is(status.code, 0, status.stderr);
        t.regex(status.stdout, /: done$/m);
        for (const node of c.nodes)
          t.regex(status.stdout, new RegExp(`^  ${node.name}: ${escaped(NETPLUG_VERSION)} \\(pod netplug-node-\\w+, Ready\\)$`, 'm'));
        t.regex(status.stdout, new RegExp(`^Cluster Version: ${escaped(NETPLUG_VERSION)}$`, 'm'));
        if (legacyPolicy) t.regex(status.stdout, /^Next: GlobalNetworkPolicy allow-all-upgrade lets every connection through/m);
        // netplugctl version: every node records this release.
        const versions = JSON.parse(await runNetplugctl(c, installed, NETPLUGCTL, 'version', '-o', 'json'));
        t.deepEqual(
          versions.nodes.map((node: any) => `${node.name} ${node.version}`).sort(),
          c.nodes.map((node) => `${node.name} ${NETPLUG_VERSION}`).sort(),
        );

        const again = page ? await viaDocs(page.shell, page.apply) : await netplugctl(how, 'upgrade', 'apply', '--yes', ...how.flags);
        t.is(again.code, 0, again.stderr);
        t.regex(again.stdout, /nothing to do/);
      });
    },
  );

  if (method === 'manifest-kdd')
    test.serial(
      'manifest-kdd: the review of allow-all-upgrade as docs/upgrade.md gives it: flow logs, a reviewed policy, the policy deleted',
      async (t) => {
        if (!docs || !upgraded) return t.fail('not upgraded (see the test before)');
        const shell = docs.shell;
        const where = new Whereabouts();
        where.enter('the review of allow-all-upgrade');
        await withinLimit(t, 9 * 60_000, cluster, where, () => reviewAndDeleteAllowAllUpgrade(t, cluster(), shell));
      },
    );

  test.serial(
    `${method}: rollback turns network policy off, then puts v3.30.0 back; its pods run, new ones get traffic, the cluster says v3.30.0`,
    async (t) => {
      const where = new Whereabouts();
      where.enter('netplugctl upgrade rollback');
      await withinLimit(t, 5 * 60_000, cluster, where, async () => {
        const c = cluster();
        if (!installed || !how || !upgraded) return t.fail('not upgraded (see the test before)');
        const operated = method === 'operator' || method === 'helm';
        // This release's operator wrote its default (Enabled) into the spec: the rollback puts it back after turning it off.
        const enforcement = async () => (await getJson(c, 'installation', 'default')).spec.policy?.enforcement;
        const before = operated ? await enforcement() : undefined;
        const started = Date.now();
        const rollback = docs
          ? await viaDocs(docs.shell, docs.rollback)
          : await netplugctl(
              how,
              'upgrade',
              'rollback',
              ...how.flags.slice(0, 2),
              ...how.flags.filter((f, i, all) => f === '--helm' || all[i - 1] === '--helm'),
            );
        t.log(rollback.stdout);
        t.is(rollback.code, 0, rollback.stderr);
        where.enter('the checks after the rollback');
        t.log(`${method}: rollback took ${((Date.now() - started) / 1000).toFixed(1)} s`);
        t.regex(rollback.stdout, /policy: enforcement off \(.*\); DaemonSet \S+\/netplug-node rolled out/);
        // Deleted by the rollback (etcd), or by the review before it (Kubernetes datastore).
        if (method === 'manifest-etcd') t.regex(rollback.stdout, /allow-all-upgrade: GlobalNetworkPolicy allow-all-upgrade deleted/);
        if (method === 'manifest-kdd') t.regex(rollback.stdout, /allow-all-upgrade: GlobalNetworkPolicy allow-all-upgrade is gone already/);
        const ds = await nodeDaemonSet();
        t.true(ds.spec.template.spec.containers.every((container: any) => container.image === 'localhost/netplug:v3.30.0'));
        if (method !== 'operator' && method !== 'helm') t.true(legacyEnv(ds), 'the v3.30.0 template, as it was');
        const pods = (await getJson(c, '-n', installed.namespace, 'pods', '-l', 'k8s-app=netplug-node')).items;
        t.true(
          pods.every((pod: any) => pod.status.phase === 'Running' && pod.spec.containers.every((x: any) => x.image.endsWith(':v3.30.0'))),
        );
        // The v3.30.0 node agent wrote its version back.
        t.regex(await runNetplugctl(c, installed, installed.release.netplugctl, 'version'), /Cluster Version:\s+v3\.30\.0\n/);
        // And the records of this release are gone from every node (the plan's last step), as this release's netplugctl lists them.
        t.regex(await runNetplugctl(c, installed, NETPLUGCTL, 'version'), /\nNODE +VERSION\n(\S+ +\(none recorded\)\n)+$/);
        await checkNewPodGetsTraffic(t, c);
        if (operated) t.is(await enforcement(), before, "the Installation's setting as it was");
      });
    },
  );
}
