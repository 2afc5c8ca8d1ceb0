// What each step does. Every one is idempotent: run again after a kill at any point, it finishes
// the job or finds it done (server-side apply is; the guarded patches test before they change;
// the waits only read).
import { createAllowAllUpgrade } from './allow-all-upgrade.ts';
import { CONTROLLERS_DEPLOYMENT, NODE_DAEMONSET, nodeVersions, OPERATOR_DEPLOYMENT } from './detect.ts';
import { readClusterInformation } from './cluster-info.ts';
import { migrateFieldManagers } from './field-managers.ts';
import { helmUpgrade, type HelmTarget } from './helm.ts';
import { applyHostLocalSteps } from './host-local.ts';
import { describe, type Json, type ObjectRef, type UpgradeKube } from './kube.ts';
import { restoreReferences, stripReferences } from './owner-references.ts';
import { waitFor, waitRollout } from './rollout.ts';
import type { Step } from './steps.ts';
import type { DatastoreSettings } from '../store/open.ts';
import { readVersionRecords } from './version-records.ts';

export interface StepContext {
  kube: UpgradeKube;
  target: string;
  namespace: string;
  operatorNamespace?: string | undefined;
  objects: readonly Json[];
  crds: readonly Json[];
  helm?: (HelmTarget & { revision: number }) | undefined;
  /** Where ClusterInformation lives. */
  datastore: DatastoreSettings;
  timeoutMs: number;
  signal: AbortSignal;
  progress: (line: string) => void;
}

export async function runStep(step: Step, ctx: StepContext): Promise<string> {
  const { kube } = ctx;
  switch (step.id) {
    case 'strip-owner-references':
      return stripReferences(kube);
    case 'host-local': {
      const done = await applyHostLocalSteps(kube, ctx.namespace);
      return done.length ? done.join('; ') : 'already done';
    }
    case 'migrate-field-managers': {
      let moved = 0;
      for (const ref of step.objects ?? []) if (await migrateFieldManagers(kube, ref)) moved++;
      return `${moved} object(s) moved to netplugctl`;
    }
    case 'apply-crds':
      return applyCrds(ctx);
    case 'allow-all-upgrade':
      if (!step.policy) throw new Error('the recorded step has no policy document');
      return createAllowAllUpgrade(ctx.datastore, step.policy);
    case 'apply-manifest':
    case 'apply-operator': {
      for (const object of ctx.objects) {
        ctx.signal.throwIfAborted();
        await kube.apply(object);
      }
      return `${ctx.objects.length} objects applied`;
    }
    case 'helm-upgrade':
      if (!ctx.helm) throw new Error('the helm release is not known');
      return helmUpgrade(kube, ctx.helm, ctx.helm.revision, ctx.signal);
    case 'wait-rollout':
      return waitForRollout(ctx);
    case 'restore-owner-references':
      return restoreReferences(kube);
    case 'check-version':
      return checkVersion(ctx);
    case 'node-version-records':
      return readVersionRecords(ctx.datastore, ctx.target);
  }
}

const daemonSet = (ctx: Pick<StepContext, 'namespace'>): ObjectRef => ({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  name: NODE_DAEMONSET,
  namespace: ctx.namespace,
});

async function applyCrds(ctx: StepContext): Promise<string> {
  for (const crd of ctx.crds) {
    ctx.signal.throwIfAborted();
    await ctx.kube.apply(crd);
  }
  // The new kinds are usable once each CRD is Established.
  for (const crd of ctx.crds)
    await waitFor(
      `CRD ${crd.metadata.name} Established`,
      async () => {
        const live = await ctx.kube.get({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          name: crd.metadata.name,
        });
        const established = (live.status?.conditions ?? []).some((c: Json) => c.type === 'Established' && c.status === 'True');
        return established ? { done: true } : { waiting: 'not Established yet' };
      },
      ctx.timeoutMs,
      ctx.signal,
      ctx.progress,
    );
  ctx.kube.forgetDiscovery();
  return `${ctx.crds.length} CRDs applied and Established`;
}

async function waitForRollout(ctx: StepContext): Promise<string> {
  const { kube } = ctx;
  const lines: string[] = [];
  if (ctx.operatorNamespace) {
    const operator = { apiVersion: 'apps/v1', kind: 'Deployment', name: OPERATOR_DEPLOYMENT, namespace: ctx.operatorNamespace };
    lines.push(`${describe(operator)} ${await waitRollout(kube, operator, ctx.timeoutMs, ctx.signal, ctx.progress)}`);
    lines.push(
      await waitFor<string>(
        `Installation default at ${ctx.target} and NetplugStatus netplug Available`,
        async () => {
          const installation = await kube.getOrNothing({ apiVersion: 'operator.projectnet.org/v1', kind: 'Installation', name: 'default' });
          const status = await kube.getOrNothing({ apiVersion: 'operator.projectnet.org/v1', kind: 'NetplugStatus', name: 'netplug' });
          const version = installation?.status?.netplugVersion;
          const available = (status?.status?.conditions ?? []).find((c: Json) => c.type === 'Available');
          if (version !== ctx.target) return { waiting: `Installation status.netplugVersion is ${version ?? 'unset'}` };
          if (available?.status !== 'True') return { waiting: `NetplugStatus netplug Available is ${available?.status ?? 'unset'}` };
          return { done: `Installation default at ${version}, NetplugStatus netplug Available` };
        },
        ctx.timeoutMs,
        ctx.signal,
        ctx.progress,
      ),
    );
  }
  const node = daemonSet(ctx);
  const controllers = { apiVersion: 'apps/v1', kind: 'Deployment', name: CONTROLLERS_DEPLOYMENT, namespace: ctx.namespace };
  // The operator changes the DaemonSet after its own rollout: wait until the template names the target first.
  await waitFor(
    `${describe(node)} to run ${ctx.target}`,
    async () => {
      const ds = await kube.getOrNothing(node);
      const images = (ds?.spec?.template?.spec?.containers ?? []).map((c: Json) => c.image as string);
      return images.length && images.every((image: string) => image.endsWith(`:${ctx.target}`))
        ? { done: true }
        : { waiting: `its template's images are ${images.join(', ') || 'none'}` };
    },
    ctx.timeoutMs,
    ctx.signal,
    ctx.progress,
  );
  lines.push(`${describe(node)} ${await waitRollout(kube, node, ctx.timeoutMs, ctx.signal, ctx.progress)}`);
  lines.push(`${describe(controllers)} ${await waitRollout(kube, controllers, ctx.timeoutMs, ctx.signal, ctx.progress)}`);
  lines.push(await waitNodesAt(ctx));
  return lines.join('; ');
}

/** Every node pod Ready and running the target (the facts, not ClusterInformation alone, which flaps mid-rollout). */
function waitNodesAt(ctx: StepContext): Promise<string> {
  return waitFor<string>(
    `every netplug-node pod Ready at ${ctx.target}`,
    async () => {
      const nodes = await nodeVersions(ctx.kube, ctx.namespace);
      const ds = await ctx.kube.getOrNothing(daemonSet(ctx));
      const desired = ds?.status?.desiredNumberScheduled ?? 0;
      const behind = nodes.filter((n) => n.version !== ctx.target || !n.ready);
      if (nodes.length !== desired || behind.length)
        return {
          waiting: `${nodes.length - behind.length}/${desired} at ${ctx.target} and Ready (${behind.map((n) => `${n.node}: ${n.version}${n.ready ? '' : ', not Ready'}`).join(', ')})`,
        };
      return { done: `${nodes.length}/${desired} node pods Ready at ${ctx.target}` };
    },
    ctx.timeoutMs,
    ctx.signal,
    ctx.progress,
  );
}

async function checkVersion(ctx: StepContext): Promise<string> {
  const nodes = await waitNodesAt(ctx);
  const cluster = await waitFor<string>(
    `ClusterInformation default at ${ctx.target}`,
    async () => {
      const read = await readClusterInformation(ctx.datastore);
      if (read.problem) return { waiting: `${read.where}: ${read.problem}` };
      const version = read.info?.netplugVersion;
      return version === ctx.target ? { done: `Cluster Version ${version}` } : { waiting: `Cluster Version is ${version ?? 'unset'}` };
    },
    ctx.timeoutMs,
    ctx.signal,
    ctx.progress,
  );
  return `${cluster}; ${nodes}`;
}
