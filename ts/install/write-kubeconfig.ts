// The CNI plugin's kubeconfig (<conf dir>/netplug-kubeconfig, 0600): a TokenRequest token of the
// netplug-cni-plugin service account (24 h by default), the API server as the pod sees it, the
// CA of the pod's service account (or insecure-skip-tls-verify with SKIP_TLS_VERIFY=true).
import { join } from 'node:path';

import type { Log } from '../runtime/log.ts';
import type { KubeAccess } from './open-kube-access.ts';
import { KUBECONFIG_NAME, type InstallSettings } from './settings.ts';
import { writeFileAtomically } from './write-atomically.ts';

/** The YAML text; JSON strings are YAML double-quoted scalars, so any value is quoted safely. */
function kubeconfigText(server: string, ca: string | undefined, skipTlsVerify: boolean, token: string): string {
  const q = (value: string) => JSON.stringify(value);
  const trust =
    skipTlsVerify || ca === undefined
      ? 'insecure-skip-tls-verify: true'
      : `certificate-authority-data: ${q(Buffer.from(ca).toString('base64'))}`;
  return [
    '# Kubeconfig file for the netplug CNI plugin (written by netplug-install).',
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: local',
    '  cluster:',
    `    server: ${q(server)}`,
    `    ${trust}`,
    'users:',
    '- name: netplug',
    '  user:',
    `    token: ${q(token)}`,
    'contexts:',
    '- name: netplug-context',
    '  context:',
    '    cluster: local',
    '    user: netplug',
    'current-context: netplug-context',
    '',
  ].join('\n');
}

/** Requests a token for the plugin's service account and writes the kubeconfig; resolves to the token's expiry. */
export async function writeKubeconfig(settings: InstallSettings, kube: KubeAccess, log: Log): Promise<Date> {
  const requested = Date.now();
  const issued = await kube.core.createNamespacedServiceAccountToken({
    name: settings.cniServiceAccount,
    namespace: kube.namespace,
    body: { spec: { audiences: [], expirationSeconds: settings.tokenSeconds } },
  });
  const token = issued.status?.token;
  if (!token) throw new Error(`the TokenRequest for ${kube.namespace}/${settings.cniServiceAccount} returned no token`);
  const expires = issued.status?.expirationTimestamp
    ? new Date(issued.status.expirationTimestamp)
    : new Date(requested + settings.tokenSeconds * 1000);
  if (kube.ca === undefined && !settings.skipTlsVerify)
    log.warning('no CA for the API server is known: the kubeconfig skips TLS verification');
  await writeFileAtomically(
    join(settings.confDir, KUBECONFIG_NAME),
    kubeconfigText(kube.server, kube.ca, settings.skipTlsVerify, token),
    0o600,
  );
  log.info(
    `wrote ${join(settings.hostNetDir, KUBECONFIG_NAME)} with a token for ${kube.namespace}/${settings.cniServiceAccount} valid until ${expires.toISOString()}`,
  );
  return expires;
}
