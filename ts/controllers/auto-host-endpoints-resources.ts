// HostEndpoint and KubeControllersConfiguration documents, as netplug-kube-controllers and
// `netplugctl migrate auto-host-endpoints` read and write them on either datastore: Store keys
// under /netplug/resources/v3/projectnet.org/, which the Kubernetes datastore keeps as native
// custom resources (deploy/crds/hostendpoints.yaml, kubecontrollersconfigurations.yaml). Every
// document read is checked: a broken one is reported by kind, name and field, never used.
import { randomUUID } from 'node:crypto';

import * as z from 'zod/mini';

import { describeValue } from '../cni/errors.ts';
import { fieldPath } from '../config/issues.ts';
import { KINDS, objectName } from '../store/kubernetes/resources.ts';
import { API_VERSION, StoreDocumentError, type Entry, type Store } from '../store/store.ts';

/** Marks the host endpoints the controllers own; they never touch one without it. */
export const CREATED_BY_LABEL = 'projectnet.org/created-by';
export const CREATED_BY = 'netplug-kube-controllers';
/** The allow-all profile of automatic host endpoints (netplug enforces no host policy; the name is the contract). */
export const DEFAULT_ALLOW_PROFILE = 'projectnet-default-allow';
export const ALL_INTERFACES = '*';
export const CONFIGURATION_NAME = 'default';

const prefixOf = (kind: string) => (KINDS.find((k) => k.kind === kind) as { prefix: string }).prefix;
export const HOST_ENDPOINTS = prefixOf('HostEndpoint');
export const hostEndpointKey = (name: string): string => `${HOST_ENDPOINTS}${name}`;
export const CONFIGURATION_KEY = `${prefixOf('KubeControllersConfiguration')}${CONFIGURATION_NAME}`;

/** `<node>-auto-hep`; a name too long for the API is hashed as the Kubernetes datastore hashes keys. */
export const autoHostEndpointName = (node: string): string => objectName(`${node}-auto-hep`);

const labels = z.record(z.string(), z.string());
const metadata = z.looseObject({
  name: z.string(),
  uid: z.optional(z.string()),
  creationTimestamp: z.optional(z.string()),
  labels: z.optional(labels),
});

const hostEndpointSchema = z.looseObject({
  kind: z.literal('HostEndpoint'),
  apiVersion: z.string(),
  metadata,
  spec: z.looseObject({
    node: z.optional(z.string()),
    interfaceName: z.optional(z.string()),
    expectedIPs: z.optional(z.array(z.string())),
    profiles: z.optional(z.array(z.string())),
    ports: z.optional(
      z.array(
        z.object({ name: z.string(), protocol: z.enum(['TCP', 'UDP', 'SCTP']), port: z.int().check(z.minimum(1), z.maximum(65535)) }),
      ),
    ),
  }),
});
export type HostEndpoint = z.infer<typeof hostEndpointSchema>;

const autoCreate = z.enum(['Enabled', 'Disabled']);
export type AutoCreate = z.infer<typeof autoCreate>;
const controllersSchema = z.looseObject({
  controllers: z.optional(
    z.looseObject({
      node: z.optional(z.looseObject({ hostEndpoint: z.optional(z.looseObject({ autoCreate: z.optional(autoCreate) })) })),
    }),
  ),
});
const configurationSchema = z.looseObject({
  kind: z.literal('KubeControllersConfiguration'),
  apiVersion: z.string(),
  metadata,
  spec: controllersSchema,
  status: z.optional(z.looseObject({ runningConfig: z.optional(controllersSchema) })),
});
export type ControllersConfiguration = z.infer<typeof configurationSchema>;
export type ControllersSpec = z.infer<typeof controllersSchema>;

function checked<T>(schema: z.ZodMiniType<T>, kind: string, entry: Entry<unknown>): Entry<T> {
  const parsed = schema.safeParse(entry.value);
  if (parsed.success) return { ...entry, value: parsed.data };
  const [issue] = parsed.error.issues;
  const name = entry.key.slice(entry.key.lastIndexOf('/') + 1);
  const field = issue ? fieldPath(issue.path) : '(top level)';
  throw new StoreDocumentError(
    `the datastore's ${kind} "${name}" (key ${entry.key}) is broken: field "${field}" ${issue ? problem(issue, entry.value) : 'is invalid'}; repair or remove it`,
  );
}

/** What is wrong, with the value found (zod/mini's issues do not carry it). */
function problem(issue: z.core.$ZodIssue, document: unknown): string {
  const got = issue.path.reduce<unknown>((value, key) => (value as Record<PropertyKey, unknown> | undefined)?.[key], document);
  if (got === undefined) return 'is required';
  const found = `, got ${describeValue(got, 64)}`;
  switch (issue.code) {
    case 'invalid_type':
      return `must be ${/^[aeiou]/.test(issue.expected) ? 'an' : 'a'} ${issue.expected}${found}`;
    case 'invalid_value':
      return `must be ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}${found}`;
    case 'too_small':
      return `must be at least ${String(issue.minimum)}${found}`;
    case 'too_big':
      return `must be at most ${String(issue.maximum)}${found}`;
    default:
      return `is invalid (${issue.message})${found}`;
  }
}

export const checkedHostEndpoint = (entry: Entry<unknown>): Entry<HostEndpoint> => checked(hostEndpointSchema, 'HostEndpoint', entry);

export async function listHostEndpoints(store: Store): Promise<Entry<HostEndpoint>[]> {
  return (await store.list(HOST_ENDPOINTS)).map(checkedHostEndpoint);
}

/** Whether the controllers made it (and so may change or delete it). */
export const isAutomatic = (endpoint: HostEndpoint): boolean => endpoint.metadata.labels?.[CREATED_BY_LABEL] === CREATED_BY;

/** All interfaces of a node, written by someone else: what the migration moves to automatic ones. */
export const isAllInterfaces = (endpoint: HostEndpoint): boolean =>
  endpoint.spec.interfaceName === ALL_INTERFACES && !isAutomatic(endpoint);

export async function readConfiguration(store: Store): Promise<Entry<ControllersConfiguration> | undefined> {
  const entry = await store.get(CONFIGURATION_KEY);
  return entry && checked(configurationSchema, 'KubeControllersConfiguration', entry);
}

/** What the configuration says (absent fields: Disabled, the default). */
export const autoCreateOf = (spec: ControllersSpec | undefined): AutoCreate =>
  spec?.controllers?.node?.hostEndpoint?.autoCreate ?? 'Disabled';

/** A new document of `kind`, with the identity the Kubernetes API would give it (used as is on etcd). */
export function newDocument<K extends string, S>(kind: K, name: string, objectLabels: Record<string, string> | undefined, spec: S) {
  return {
    kind,
    apiVersion: API_VERSION,
    metadata: { name, uid: randomUUID(), creationTimestamp: new Date().toISOString(), ...(objectLabels ? { labels: objectLabels } : {}) },
    spec,
  };
}

/** `autoCreate` as a configuration spec holds it. */
export const autoCreateSpec = (value: AutoCreate): ControllersSpec => ({ controllers: { node: { hostEndpoint: { autoCreate: value } } } });
