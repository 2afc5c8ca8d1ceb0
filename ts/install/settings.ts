// netplug-install's environment (reference-operator-and-upgrade §B with netplug names, §E.3), read
// once. Host paths are under a host root (the pod mounts the host at /host) so that tests, and a
// bare host, can run the installer against any directory.
import { hostname } from 'node:os';
import { join } from 'node:path';

import { parseDuration } from '../config/duration.ts';

export const CONFLIST_TEMPLATE_KEY = 'cni_network_config';
export const KUBECONFIG_NAME = 'netplug-kubeconfig';
export const TLS_DIR_NAME = 'netplug-tls';
export const TLS_FILES = ['etcd-ca', 'etcd-cert', 'etcd-key'] as const;
/** Host paths (without the root) the record and the uninstall speak of. */
export const HOST_BIN_DIR = '/opt/cni/bin';
export const HOST_CONF_DIR = '/etc/cni/net.d';
export const HOST_RECORD = '/var/lib/netplug/cni-installed.json';

export interface InstallSettings {
  env: NodeJS.ProcessEnv;
  /** Where the host's file system is mounted (NETPLUG_HOST_ROOT). */
  root: string;
  /** The image's files to install (NETPLUG_CNI_SOURCE_DIR). */
  sourceDir: string;
  binDir: string;
  confDir: string;
  recordPath: string;
  /** The conf dir as the host sees it, written into the conflist (CNI_NET_DIR). */
  hostNetDir: string;
  confName: string;
  oldConfName: string | undefined;
  tlsAssetsDir: string;
  skipBinaries: Set<string>;
  updateBinaries: boolean;
  /**
   * FAST_PATH (default true): `netplug` is the shim that hands each call to netplug-node, with the
   * one-shot plugin beside it as `netplug-oneshot`; false: the one-shot plugin itself is `netplug`.
   */
  fastPath: boolean;
  sleep: boolean;
  serviceAccountDir: string;
  cniServiceAccount: string;
  tokenSeconds: number;
  /** CNI_TOKEN_REFRESH_INTERVAL in milliseconds, when given. */
  tokenRefreshMs: number | undefined;
  skipTlsVerify: boolean;
  configMapName: string | undefined;
  /** The ConfigMap's key holding the template (NETPLUG_CONFIG_MAP_KEY): the operator's ConfigMap calls it `config`. */
  configMapKey: string;
}

/** A setting that cannot be used: the message names the variable and its value. */
export class SettingsError extends Error {}

const flag = (value: string | undefined, fallback: boolean): boolean =>
  value === undefined || value === '' ? fallback : value.toLowerCase() === 'true';

export function readSettings(env: NodeJS.ProcessEnv): InstallSettings {
  const root = env.NETPLUG_HOST_ROOT || '/host';
  const tokenSeconds = Number(env.NETPLUG_CNI_TOKEN_SECONDS || '86400');
  if (!Number.isInteger(tokenSeconds) || tokenSeconds < 600) {
    throw new SettingsError(`NETPLUG_CNI_TOKEN_SECONDS "${env.NETPLUG_CNI_TOKEN_SECONDS}" must be a whole number of seconds, at least 600`);
  }
  let tokenRefreshMs: number | undefined;
  if (env.CNI_TOKEN_REFRESH_INTERVAL) {
    tokenRefreshMs = parseDuration(env.CNI_TOKEN_REFRESH_INTERVAL);
    if (tokenRefreshMs === undefined || tokenRefreshMs <= 0) {
      throw new SettingsError(
        `CNI_TOKEN_REFRESH_INTERVAL "${env.CNI_TOKEN_REFRESH_INTERVAL}" must be a positive duration such as 30s or 1h`,
      );
    }
  }
  const fastPath = (env.FAST_PATH ?? '').trim().toLowerCase() || 'true';
  if (fastPath !== 'true' && fastPath !== 'false') throw new SettingsError(`FAST_PATH "${env.FAST_PATH}" must be true or false`);
  const confName = env.CNI_CONF_NAME || '10-netplug.conflist';
  if (confName.includes('/')) throw new SettingsError(`CNI_CONF_NAME "${confName}" must be a file name, not a path`);
  return {
    env,
    root,
    sourceDir: env.NETPLUG_CNI_SOURCE_DIR || '/opt/cni/bin',
    binDir: join(root, HOST_BIN_DIR),
    confDir: join(root, HOST_CONF_DIR),
    recordPath: join(root, HOST_RECORD),
    hostNetDir: env.CNI_NET_DIR || HOST_CONF_DIR,
    confName,
    oldConfName: env.CNI_OLD_CONF_NAME && !env.CNI_OLD_CONF_NAME.includes('/') ? env.CNI_OLD_CONF_NAME : undefined,
    tlsAssetsDir: env.TLS_ASSETS_DIR || '/netplug-secrets',
    skipBinaries: new Set(
      (env.SKIP_CNI_BINARIES ?? '')
        .split(',')
        .map((name) => name.trim())
        .filter(Boolean),
    ),
    updateBinaries: flag(env.UPDATE_CNI_BINARIES, true),
    fastPath: fastPath === 'true',
    sleep: flag(env.SLEEP, true),
    serviceAccountDir: env.NETPLUG_SERVICEACCOUNT_DIR || '/var/run/secrets/kubernetes.io/serviceaccount',
    cniServiceAccount: env.NETPLUG_CNI_SERVICE_ACCOUNT || 'netplug-cni-plugin',
    tokenSeconds,
    tokenRefreshMs,
    skipTlsVerify: flag(env.SKIP_TLS_VERIFY, false),
    configMapName: env.NETPLUG_CONFIG_MAP || undefined,
    configMapKey: env.NETPLUG_CONFIG_MAP_KEY || CONFLIST_TEMPLATE_KEY,
  };
}

/** The node name the conflist names: KUBERNETES_NODE_NAME, else the host name (as the reference). */
export const nodeName = (env: NodeJS.ProcessEnv): string => env.KUBERNETES_NODE_NAME || hostname();
