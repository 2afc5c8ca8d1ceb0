// netplug-install's environment (the reference's install-cni variables with netplug names), parsed
// once by one schema (runtime/settings.ts): a value that cannot be used stops the installer with a
// line naming the variable and its value, before anything is written. Host paths are under a host
// root (the pod mounts the host at /host) so that tests, and a bare host, can run the installer
// against any directory. The template's other placeholders (datastore, etcd, log file) are passed
// to the plugin's conflist as they are given (placeholder-values.ts).
import { hostname } from 'node:os';
import { join } from 'node:path';

import * as z from 'zod/mini';

import { parseDuration } from '../config/duration.ts';
import type { Level } from '../log/logger.ts';
import { LOG_LEVEL } from '../runtime/log.ts';
import { flag, Invalid, parseEnv, setting, text } from '../runtime/settings.ts';

/** What a setting that cannot be used throws (the runtime's). */
export { SettingsError } from '../runtime/settings.ts';

const CONFLIST_TEMPLATE_KEY = 'cni_network_config';
export const KUBECONFIG_NAME = 'netplug-kubeconfig';
export const TLS_DIR_NAME = 'netplug-tls';
export const TLS_FILES = ['etcd-ca', 'etcd-cert', 'etcd-key'] as const;
/** Host paths (without the root) the record and the uninstall speak of. */
export const HOST_BIN_DIR = '/opt/cni/bin';
export const HOST_CONF_DIR = '/etc/cni/net.d';
const HOST_RECORD = '/var/lib/netplug/cni-installed.json';

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
  /** CNI_MTU for the template: digits, or "" for automatic (0 or unset). */
  mtu: string;
  /** The installer's own log level (LOG_LEVEL). */
  logLevel: Level;
}

const name = (fallback: string) => setting((given) => given, fallback);

const schema = z.object({
  NETPLUG_HOST_ROOT: name('/host'),
  NETPLUG_CNI_SOURCE_DIR: name('/opt/cni/bin'),
  CNI_NET_DIR: name(HOST_CONF_DIR),
  CNI_CONF_NAME: setting((given) => {
    if (given.includes('/')) throw new Invalid('must be a file name, not a path');
    return given;
  }, '10-netplug.conflist'),
  // A path is no conflist of this directory: ignored.
  CNI_OLD_CONF_NAME: setting((given) => (given.includes('/') ? undefined : given)),
  TLS_ASSETS_DIR: name('/netplug-secrets'),
  SKIP_CNI_BINARIES: text(),
  UPDATE_CNI_BINARIES: flag(true),
  FAST_PATH: flag(true),
  SLEEP: flag(true),
  SKIP_TLS_VERIFY: flag(false),
  NETPLUG_SERVICEACCOUNT_DIR: name('/var/run/secrets/kubernetes.io/serviceaccount'),
  NETPLUG_CNI_SERVICE_ACCOUNT: name('netplug-cni-plugin'),
  NETPLUG_CNI_TOKEN_SECONDS: setting((given) => {
    const seconds = Number(given);
    if (!/^\d+$/.test(given) || seconds < 600) throw new Invalid('must be a whole number of seconds, at least 600');
    return seconds;
  }, '86400'),
  CNI_TOKEN_REFRESH_INTERVAL: setting((given) => {
    const ms = parseDuration(given);
    if (ms === undefined || ms <= 0) throw new Invalid('must be a positive duration such as 30s or 1h');
    return ms;
  }),
  NETPLUG_CONFIG_MAP: text(),
  NETPLUG_CONFIG_MAP_KEY: name(CONFLIST_TEMPLATE_KEY),
  // 0 or empty: automatic (the field is dropped from the conflist).
  CNI_MTU: setting((given) => {
    if (!/^\d+$/.test(given)) throw new Invalid('must be a whole number (0 or empty: automatic)');
    return given === '0' ? '' : given;
  }, '0'),
  LOG_LEVEL,
});

/** The installer's settings; SettingsError names every variable that cannot be used and its value. */
export function readSettings(env: NodeJS.ProcessEnv): InstallSettings {
  const given = parseEnv(schema, env);
  const root = given.NETPLUG_HOST_ROOT;
  return {
    env,
    root,
    sourceDir: given.NETPLUG_CNI_SOURCE_DIR,
    binDir: join(root, HOST_BIN_DIR),
    confDir: join(root, HOST_CONF_DIR),
    recordPath: join(root, HOST_RECORD),
    hostNetDir: given.CNI_NET_DIR,
    confName: given.CNI_CONF_NAME,
    oldConfName: given.CNI_OLD_CONF_NAME,
    tlsAssetsDir: given.TLS_ASSETS_DIR,
    skipBinaries: new Set(
      (given.SKIP_CNI_BINARIES ?? '')
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean),
    ),
    updateBinaries: given.UPDATE_CNI_BINARIES,
    fastPath: given.FAST_PATH,
    sleep: given.SLEEP,
    serviceAccountDir: given.NETPLUG_SERVICEACCOUNT_DIR,
    cniServiceAccount: given.NETPLUG_CNI_SERVICE_ACCOUNT,
    tokenSeconds: given.NETPLUG_CNI_TOKEN_SECONDS,
    tokenRefreshMs: given.CNI_TOKEN_REFRESH_INTERVAL,
    skipTlsVerify: given.SKIP_TLS_VERIFY,
    configMapName: given.NETPLUG_CONFIG_MAP,
    configMapKey: given.NETPLUG_CONFIG_MAP_KEY,
    mtu: given.CNI_MTU,
    logLevel: given.LOG_LEVEL,
  };
}

/** The node name the conflist names: KUBERNETES_NODE_NAME, else the host name (as the reference). */
export const nodeName = (env: NodeJS.ProcessEnv): string => env.KUBERNETES_NODE_NAME || hostname();
