// The network configuration (netconf) of a netplug network: one zod schema for every field of the
// specification's tables, with its type and default. The schema gives the typed view netplug
// works with; fields it does not know are not an error and pass through untouched, because
// delegated plugins receive the netconf's bytes as they came.
import { z } from 'zod';

import { CniError, ErrorCode } from '../cni/errors.ts';
import { IMPLICIT_VERSION, isSupported, SUPPORTED_VERSIONS } from '../cni/versions.ts';
import { parseIpam, type IpamConfig } from './ipam.ts';
import { configError, describeIssues } from './issues.ts';

// A netconf is parsed once per process: compiling validators (zod's default) costs more than it
// saves there.
z.config({ jitless: true });

/** What installers write into `log_file_path`; a netconf without the field logs to stderr only. */
export const DEFAULT_LOG_FILE_PATH = '/var/log/netplug/cni/cni.log';
export const DEFAULT_ENDPOINT_STATUS_DIR = '/var/run/netplug/endpoint-status';
export const LOG_LEVELS = ['ERROR', 'WARNING', 'INFO', 'DEBUG'] as const;

/** CNI network names: a letter or digit, then letters, digits, '_', '.' or '-'. */
const NETWORK_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

const netconfSchema = z
  .object({
    cniVersion: z.string().optional(),
    name: z.string().regex(NETWORK_NAME, {
      error: "must start with a letter or digit, followed by letters, digits, '_', '.' or '-'",
    }),
    type: z.string(),
    nodename: z.string().min(1).optional(),
    mtu: z.number().int().min(68).max(65535).optional(),
    num_queues: z.number().int().min(1).max(1024).default(1),
    datastore_type: z.enum(['etcdv3', 'kubernetes']).default('etcdv3'),
    etcd_endpoints: z.string().min(1).optional(),
    etcd_discovery_srv: z.string().min(1).optional(),
    etcd_key_file: z.string().min(1).optional(),
    etcd_cert_file: z.string().min(1).optional(),
    etcd_ca_cert_file: z.string().min(1).optional(),
    /** Deprecated: used only without etcd_endpoints. */
    etcd_authority: z.string().min(1).default('127.0.0.1:2379'),
    /** Deprecated: used only without etcd_endpoints. */
    etcd_scheme: z.enum(['http', 'https']).default('http'),
    ipam: z.object({ type: z.string().min(1) }),
    log_level: z
      .string()
      .refine((level) => (LOG_LEVELS as readonly string[]).includes(level.toUpperCase()), {
        error: `must be one of ${LOG_LEVELS.join(', ')}`,
      })
      .transform((level) => level.toUpperCase() as (typeof LOG_LEVELS)[number])
      .default('INFO'),
    log_file_path: z.string().optional(),
    log_file_max_size: z.number().int().min(1).default(100),
    log_file_max_age: z.number().int().min(1).default(30),
    log_file_max_count: z.number().int().min(0).default(10),
    container_settings: z.object({ allow_ip_forwarding: z.boolean().default(false) }).default({ allow_ip_forwarding: false }),
    readiness_gates: z.array(httpUrl).optional(),
    kubernetes: z
      .object({
        kubeconfig: z.string().min(1).optional(),
        k8s_api_root: httpUrl.optional(),
        node_name: z.string().min(1).optional(),
      })
      .optional(),
    policy: z
      .object({ type: z.string().refine((type) => type === 'k8s', { error: 'must be "k8s", the only supported policy type' }) })
      .optional(),
    policy_setup_timeout_seconds: z.number().int().min(0).default(0),
    endpoint_status_dir: z.string().min(1).default(DEFAULT_ENDPOINT_STATUS_DIR),
    feature_control: z
      .object({ ip_addrs_no_ipam: z.boolean().default(false), floating_ips: z.boolean().default(false) })
      .default({ ip_addrs_no_ipam: false, floating_ips: false }),
    /** With host-local `routes`: also install the default routes. */
    include_default_routes: z.boolean().default(false),
    prevResult: z.unknown().optional(),
  })
  .superRefine((conf, ctx) => {
    if (conf.etcd_discovery_srv && conf.etcd_endpoints) {
      ctx.addIssue({
        code: 'custom',
        path: ['etcd_discovery_srv'],
        input: conf.etcd_discovery_srv,
        message: 'cannot be combined with etcd_endpoints; give one of them',
      });
    }
    if (Boolean(conf.etcd_key_file) !== Boolean(conf.etcd_cert_file)) {
      const present = conf.etcd_key_file ? 'etcd_key_file' : 'etcd_cert_file';
      ctx.addIssue({
        code: 'custom',
        path: [present],
        input: conf.etcd_key_file ?? conf.etcd_cert_file,
        message: 'needs its partner for mutual TLS: give both etcd_key_file and etcd_cert_file',
      });
    }
  });

export type Netconf = Omit<z.infer<typeof netconfSchema>, 'ipam' | 'cniVersion'> & {
  cniVersion: (typeof SUPPORTED_VERSIONS)[number];
  ipam: IpamConfig;
};

export interface ParsedNetconf {
  conf: Netconf;
  /** The bytes as received, passed unchanged to delegated plugins. */
  raw: Buffer;
  /** The JSON as received. */
  json: Record<string, unknown>;
}

/** Decodes stdin (error 6) and validates it (error 7, or 1 for an unsupported cniVersion). */
export function parseNetconf(raw: Buffer): ParsedNetconf {
  const json = decodeJson(raw);
  const version = json['cniVersion'] ?? IMPLICIT_VERSION;
  if (typeof version !== 'string' || !isSupported(version)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `netconf field "cniVersion" is ${JSON.stringify(version)}; this plugin supports ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  const parsed = netconfSchema.safeParse(json, { reportInput: true });
  if (!parsed.success) throw configError(describeIssues(parsed.error.issues));
  // The section as received: the typed view above keeps only `ipam.type`.
  const conf = { ...parsed.data, cniVersion: version, ipam: parseIpam(json['ipam'] as { type: string }) };
  return { conf, raw, json };
}

/** The supported `cniVersion` stdin declares, if any: error objects are written in it. */
export function declaredVersion(raw: Buffer): string | undefined {
  try {
    const version = (JSON.parse(raw.toString('utf8')) as { cniVersion?: unknown }).cniVersion;
    return typeof version === 'string' && isSupported(version) ? version : undefined;
  } catch {
    return undefined;
  }
}

/** The JSON object on stdin; error 6 if it is not one. */
export function decodeJson(raw: Buffer): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new CniError(ErrorCode.DecodingFailure, `the network configuration on stdin is not valid JSON: ${(err as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new CniError(ErrorCode.DecodingFailure, 'the network configuration on stdin must be a JSON object');
  }
  return json as Record<string, unknown>;
}
