// The network configuration (netconf) of a netplug network: one zod schema for every field of the
// specification's tables, with its type and default. The schema gives the typed view netplug
// works with; fields it does not know are not an error and pass through untouched, because
// delegated plugins receive the netconf's bytes as they came.
import * as z from 'zod/mini';

import { CniError, describeValue, ErrorCode, shorten } from '../cni/errors.ts';
import { IMPLICIT_VERSION, isSupported, SUPPORTED_VERSIONS } from '../cni/versions.ts';
import { parseIpam, type IpamConfig } from './ipam.ts';
import { configError, describeIssues, fieldPath } from './issues.ts';
import { firstDuplicateKey } from './duplicate-keys.ts';
import { autoMtu, DEFAULT_MTU_FILE, mtuFromFile } from './mtu.ts';
import { isNodeName, NODE_NAME_RULE } from './nodename.ts';

// A netconf is parsed once per process, on a pod's path: zod/mini (the same validators, without
// the chained API's weight) and no compiled validators keep that cheap.
z.config({ jitless: true });

const DEFAULT_ENDPOINT_STATUS_DIR = '/var/run/netplug/endpoint-status';
const LOG_LEVELS = ['ERROR', 'WARNING', 'INFO', 'DEBUG'] as const;

/** CNI network names: a letter or digit, then letters, digits, '_', '.' or '-'. */
const NETWORK_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/**
 * How deeply values may nest. Real netconfs stay under 10 levels (a conflist's plugin, its ipam,
 * ranges, a range); validating and describing a value nested 100,000 deep would exhaust the stack.
 */
const MAX_NESTING = 64;

const nonEmpty = () => z.string().check(z.minLength(1));
/** A file path, where installers write "" for "none" (install-cni renders absent TLS files so). */
const optionalPath = () =>
  z.optional(
    z.pipe(
      z.string(),
      z.transform((path) => path || undefined),
    ),
  );
const nodeNameField = () => z.string().check(z.refine(isNodeName, { error: NODE_NAME_RULE }));
/** etcd_endpoints: a comma-separated list with at least one http(s) URL, each a URL. */
const endpointList = () =>
  z.string().check(
    z.refine((list) => list.split(',').some((item) => item.trim()), { error: 'must list at least one endpoint URL, comma-separated' }),
    z.refine((list) => list.split(',').every((item) => !item.trim() || isHttpUrl(item.trim())), {
      error: 'must be http:// or https:// URLs, comma-separated',
    }),
  );
const isHttpUrl = (text: string) => {
  try {
    const { protocol } = new URL(text);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
};
const integer = (min: number, max?: number) => z.number().check(z.int(), z.minimum(min), ...(max === undefined ? [] : [z.maximum(max)]));
const httpUrl = () => z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

const logLevel = z.pipe(
  z.string().check(
    z.refine((level) => (LOG_LEVELS as readonly string[]).includes(level.toUpperCase()), {
      error: `must be one of ${LOG_LEVELS.join(', ')}`,
    }),
  ),
  z.transform((level) => level.toUpperCase() as (typeof LOG_LEVELS)[number]),
);

const netconfSchema = z
  .object({
    cniVersion: z.optional(z.string()),
    name: z
      .string()
      .check(z.regex(NETWORK_NAME, { error: "must start with a letter or digit, followed by letters, digits, '_', '.' or '-'" })),
    type: z.string(),
    nodename: z.optional(nodeNameField()),
    /** 0 is auto (see mtu.ts); absent leaves the node agent's MTU file, else the kernel default. */
    mtu: z.optional(
      z.number().check(
        z.int(),
        z.refine((mtu) => mtu === 0 || (mtu >= 68 && mtu <= 65535), { error: 'must be 0 (auto) or from 68 to 65535' }),
      ),
    ),
    /** netplug's: where the node agent writes the MTU that "mtu": 0 uses. */
    mtu_file: z._default(nonEmpty(), DEFAULT_MTU_FILE),
    num_queues: z._default(integer(1, 1024), 1),
    datastore_type: z._default(z.enum(['etcdv3', 'kubernetes']), 'etcdv3'),
    etcd_endpoints: z.optional(endpointList()),
    etcd_discovery_srv: z.optional(nonEmpty()),
    etcd_key_file: optionalPath(),
    etcd_cert_file: optionalPath(),
    etcd_ca_cert_file: optionalPath(),
    /** Deprecated: used only without etcd_endpoints. */
    etcd_authority: z._default(nonEmpty(), '127.0.0.1:2379'),
    /** Deprecated: used only without etcd_endpoints. */
    etcd_scheme: z._default(z.enum(['http', 'https']), 'http'),
    ipam: z.object({ type: nonEmpty() }),
    log_level: z._default(logLevel, 'INFO'),
    log_file_path: z.optional(z.string()),
    log_file_max_size: z._default(integer(1), 100),
    log_file_max_age: z._default(integer(1), 30),
    log_file_max_count: z._default(integer(0), 10),
    container_settings: z._default(z.object({ allow_ip_forwarding: z._default(z.boolean(), false) }), { allow_ip_forwarding: false }),
    readiness_gates: z.optional(z.array(httpUrl())),
    /** How long each readiness gate may take to become ready (netplug's; the spec leaves it open). */
    readiness_gate_timeout_seconds: z._default(integer(1, 3600), 30),
    kubernetes: z.optional(
      z.object({ kubeconfig: z.optional(nonEmpty()), k8s_api_root: z.optional(httpUrl()), node_name: z.optional(nodeNameField()) }),
    ),
    policy: z.optional(
      z.object({ type: z.string().check(z.refine((type) => type === 'k8s', { error: 'must be "k8s", the only supported policy type' })) }),
    ),
    policy_setup_timeout_seconds: z._default(integer(0), 0),
    endpoint_status_dir: z._default(nonEmpty(), DEFAULT_ENDPOINT_STATUS_DIR),
    feature_control: z._default(
      z.object({ ip_addrs_no_ipam: z._default(z.boolean(), false), floating_ips: z._default(z.boolean(), false) }),
      { ip_addrs_no_ipam: false, floating_ips: false },
    ),
    /** With host-local `routes`: also install the default routes. */
    include_default_routes: z._default(z.boolean(), false),
    prevResult: z.optional(z.unknown()),
  })
  .check(
    z.superRefine((conf, ctx) => {
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
    }),
  );

export type Netconf = Omit<z.output<typeof netconfSchema>, 'ipam' | 'cniVersion'> & {
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

/**
 * Netconfs validated before, by their text: a resident agent is given the same few netconfs on
 * every command (each pod on a node gets its node's), and validating one took ~0.3 ms of every
 * ADD. Each call gets a copy of its own (~20 µs).
 */
const validated = new Map<string, Netconf>();
const VALIDATED_KEPT = 8;

/** Decodes stdin (error 6) and validates it (error 7, or 1 for an unsupported cniVersion). */
export function parseNetconf(raw: Buffer): ParsedNetconf {
  const text = raw.toString('utf8');
  const known = validated.get(text);
  const { conf, json } = known === undefined ? validate(text) : { conf: structuredClone(known), json: decodeJson(text) };
  if (known !== undefined) {
    // The most recently used last: the first is the one to go.
    validated.delete(text);
    validated.set(text, known);
  } else if (!('prevResult' in json)) {
    // A netconf with a prevResult (a DEL's or a CHECK's) is that call's own: kept, it would push
    // out the one every ADD of the node is given.
    validated.set(text, structuredClone(conf));
    if (validated.size > VALIDATED_KEPT) validated.delete(validated.keys().next().value as string);
  }
  // 0 is resolved here, once: whatever reads conf.mtu gets a number. Absent takes the node
  // agent's file if there is one, else stays absent (the kernel's default). Read on every call:
  // the agent writes the file when the MTU changes.
  conf.mtu = conf.mtu === 0 ? autoMtu(conf.mtu_file) : (conf.mtu ?? mtuFromFile(conf.mtu_file));
  return { conf, raw, json };
}

function validate(text: string): { conf: Netconf; json: Record<string, unknown> } {
  const json = decodeJson(text);
  const repeated = firstDuplicateKey(text);
  if (repeated) {
    throw new CniError(
      ErrorCode.InvalidConfig,
      `netconf field "${shorten(fieldPath(repeated))}" is given twice; give it once (JSON readers disagree on which copy counts, so netplug and the plugins it runs would read different netconfs)`,
    );
  }
  const deep = tooDeep(json, MAX_NESTING);
  if (deep) {
    throw new CniError(
      ErrorCode.InvalidConfig,
      `netconf field "${shorten(String(deep[0]))}" nests values more than ${MAX_NESTING} levels deep; netplug refuses such input`,
      `too deep at ${shorten(fieldPath(deep))}`,
    );
  }
  const version = json['cniVersion'] ?? IMPLICIT_VERSION;
  if (typeof version !== 'string' || !isSupported(version)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `netconf field "cniVersion" is ${describeValue(version)}; this plugin supports ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  const parsed = netconfSchema.safeParse(json, { reportInput: true });
  if (!parsed.success) throw configError(describeIssues(parsed.error.issues));
  // The section as received: the typed view above keeps only `ipam.type`.
  return { conf: { ...parsed.data, cniVersion: version, ipam: parseIpam(json['ipam'] as { type: string }) } as Netconf, json };
}

/**
 * The path to the first value nested deeper than `limit` (objects and arrays count a level each),
 * found without recursion; undefined if there is none.
 */
function tooDeep(root: unknown, limit: number): PropertyKey[] | undefined {
  const stack: Array<{ value: unknown; path: PropertyKey[] }> = [{ value: root, path: [] }];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const { value, path } = next;
    if (value === null || typeof value !== 'object') continue;
    if (path.length >= limit) return path;
    for (const [key, item] of Object.entries(value)) {
      if (item !== null && typeof item === 'object') stack.push({ value: item, path: [...path, Array.isArray(value) ? Number(key) : key] });
    }
  }
  return undefined;
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
function decodeJson(text: string): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CniError(ErrorCode.DecodingFailure, `the network configuration on stdin is not valid JSON: ${(err as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new CniError(ErrorCode.DecodingFailure, 'the network configuration on stdin must be a JSON object');
  }
  return json as Record<string, unknown>;
}
