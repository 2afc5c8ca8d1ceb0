// netplugctl migrate host-local [--kubeconfig FILE] [-n NAMESPACE] [--dry-run]: the spec's
// host-local extra steps on a live manifest install (ts/migrate/host-local.ts). Exit 0 done (or
// nothing to do), 1 refused (not a host-local manifest install) or failed, 2 a usage mistake.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import * as k8s from '@kubernetes/client-node';

import type { ClusterCommand } from '../ctl/cluster-command.ts';
import { HostLocalError, migrateHostLocal, NODE_CONTAINER, NODE_DAEMONSET, UPGRADE_IPAM, USE_POD_CIDR } from './host-local.ts';

const COMMAND = 'netplugctl migrate host-local';

const USAGE = `usage: ${COMMAND} [--kubeconfig FILE] [-n NAMESPACE] [--dry-run]

On a manifest install whose conflist uses host-local IPAM, before applying the new manifest:
removes the init container ${UPGRADE_IPAM} from the live DaemonSet ${NODE_DAEMONSET} (it moves
host-local's allocations into netplug-ipam, after which host-local hands out addresses running pods
hold) and sets ${USE_POD_CIDR}=true on its ${NODE_CONTAINER} container, in one guarded JSON patch
(one rollout). Idempotent. Refused, changing nothing, when the install does not use host-local.

  --kubeconfig FILE   else KUBECONFIG, else ~/.kube/config
  -n, --namespace NS  where netplug's manifest installed ${NODE_DAEMONSET} (default kube-system)
  --dry-run           say what would change; the API server checks the patch and keeps nothing
`;

const OPTIONS = {
  kubeconfig: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  'dry-run': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const runHostLocalCommand: ClusterCommand = async (args, env, io) => {
  let values: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; strict: true; allowPositionals: true }>>['values'];
  try {
    const parsed = parseArgs({ args: [...args], options: OPTIONS, strict: true, allowPositionals: true });
    if (parsed.positionals.length > 0) throw new Error(`unexpected argument "${parsed.positionals[0]}"`);
    values = parsed.values;
    if (values.namespace !== undefined && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(values.namespace))
      throw new Error(`--namespace "${values.namespace.slice(0, 100)}" is not a namespace name`);
  } catch (err) {
    io.err(`${COMMAND}: ${(err as Error).message.split('\n')[0]} (${COMMAND} --help)\n`);
    return 2;
  }
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  const kubeconfig = values.kubeconfig ?? env['KUBECONFIG'] ?? (env['HOME'] ? join(env['HOME'], '.kube/config') : undefined);
  if (!kubeconfig || !existsSync(kubeconfig)) {
    io.err(`${COMMAND}: kubeconfig ${kubeconfig ? `"${kubeconfig}" does not exist` : 'not given'} (--kubeconfig FILE or KUBECONFIG)\n`);
    return 1;
  }
  const kube = new k8s.KubeConfig();
  try {
    kube.loadFromFile(kubeconfig);
  } catch (err) {
    io.err(`${COMMAND}: kubeconfig "${kubeconfig}": ${(err as Error).message.split('\n')[0]}\n`);
    return 1;
  }
  const namespace = values.namespace ?? 'kube-system';
  const dryRun = values['dry-run'] === true;
  try {
    const result = await migrateHostLocal(kube, namespace, { dryRun });
    const daemonSet = `DaemonSet ${namespace}/${NODE_DAEMONSET}`;
    const verb = (done: string, would: string) => (dryRun ? would : done);
    io.out(`${daemonSet}: host-local install (ipam.type host-local in ${result.install.templateSource})\n`);
    io.out(
      result.removedUpgradeIpam
        ? `${verb('removed', 'would remove')} the init container ${UPGRADE_IPAM} (image ${result.removedUpgradeIpam.image}) from ${daemonSet}\n`
        : `no init container ${UPGRADE_IPAM}: nothing to remove\n`,
    );
    io.out(
      result.setUsePodCidr
        ? `${verb('set', 'would set')} ${USE_POD_CIDR}=true on container ${NODE_CONTAINER}\n`
        : `${USE_POD_CIDR} is true on container ${NODE_CONTAINER} already\n`,
    );
    if (result.removedUpgradeIpam || result.setUsePodCidr)
      io.out(dryRun ? 'dry run: nothing changed\n' : `${daemonSet} rolls its pods once; then apply the new manifest\n`);
    else io.out('nothing to do: apply the new manifest\n');
    return 0;
  } catch (err) {
    if (!(err instanceof HostLocalError)) throw err;
    io.err(`${COMMAND}: ${err.message}\n`);
    return 1;
  }
};
