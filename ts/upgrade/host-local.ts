// The host-local extras of a manifest install (the spec's "Host-local installs: extra steps", as
// operator-and-upgrade.md §C.8's precise form): USE_POD_CIDR=true on the netplug-node container,
// and the init container upgrade-ipam taken off the live DaemonSet, each a JSON patch that first
// tests what it read, so a concurrent change is refused rather than overwritten. Idempotent.
// TODO(issue 12 part 5): use ts/migrate/host-local.ts's functions once they land.
import { NODE_DAEMONSET } from './detect.ts';
import type { Json, ObjectRef, UpgradeKube } from './kube.ts';

export async function applyHostLocalSteps(kube: UpgradeKube, ds: ObjectRef): Promise<string[]> {
  const done: string[] = [];
  const live = await kube.get(ds);
  const pod = live.spec.template.spec;
  const index = (pod.containers as Json[]).findIndex((c) => c.name === NODE_DAEMONSET);
  const agent = pod.containers[index];
  const env = (agent?.env ?? []) as Json[];
  const current = env.findIndex((e) => e.name === 'USE_POD_CIDR');
  if (index >= 0 && env[current]?.value !== 'true') {
    const base = `/spec/template/spec/containers/${index}`;
    await kube.jsonPatch(ds, [
      { op: 'test', path: `${base}/name`, value: NODE_DAEMONSET },
      ...(current >= 0
        ? [{ op: 'replace', path: `${base}/env/${current}`, value: { name: 'USE_POD_CIDR', value: 'true' } }]
        : agent.env
          ? [{ op: 'add', path: `${base}/env/-`, value: { name: 'USE_POD_CIDR', value: 'true' } }]
          : [{ op: 'add', path: `${base}/env`, value: [{ name: 'USE_POD_CIDR', value: 'true' }] }]),
    ]);
    done.push('USE_POD_CIDR=true set on netplug-node');
  }
  const init = ((await kube.get(ds)).spec.template.spec.initContainers ?? []) as Json[];
  const at = init.findIndex((c) => c.name === 'upgrade-ipam');
  if (at >= 0) {
    await kube.jsonPatch(ds, [
      { op: 'test', path: `/spec/template/spec/initContainers/${at}/name`, value: 'upgrade-ipam' },
      { op: 'remove', path: `/spec/template/spec/initContainers/${at}` },
    ]);
    done.push('init container upgrade-ipam removed');
  }
  return done;
}
