// HostEndpoint documents: a node's interfaces that policy applies to. netplug-kube-controllers
// keeps one automatic host endpoint per node when its configuration asks for them
// (kube-controllers-configuration.ts); the Kubernetes datastore keeps them as native custom
// resources (deploy/crds/hostendpoints.yaml).
import * as z from 'zod/mini';

import { checkedBySchema, metadataSchema } from './checked-schema.ts';
import type { Entry } from './entry.ts';
import { keys } from './keys.ts';

/** Marks the host endpoints the controllers own; they never touch one without it. */
export const CREATED_BY_LABEL = 'projectnet.org/created-by';
export const CREATED_BY = 'netplug-kube-controllers';
/** The allow-all profile of automatic host endpoints (built in: ts/policy/default-allow.ts). */
export const DEFAULT_ALLOW_PROFILE = 'projectnet-default-allow';
export const ALL_INTERFACES = '*';

export const HOST_ENDPOINTS = keys.hostEndpoints;
export const hostEndpointKey = keys.hostEndpoint;

const hostEndpointSchema = z.looseObject({
  kind: z.literal('HostEndpoint'),
  apiVersion: z.string(),
  metadata: metadataSchema,
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

export const checkedHostEndpoint = (entry: Entry<unknown>): Entry<HostEndpoint> =>
  checkedBySchema(hostEndpointSchema, 'HostEndpoint', entry);

/** Whether the controllers made it (and so may change or delete it). */
export const isAutomatic = (endpoint: HostEndpoint): boolean => endpoint.metadata.labels?.[CREATED_BY_LABEL] === CREATED_BY;

/** All interfaces of a node, written by someone else: what the migration moves to automatic ones. */
export const isAllInterfaces = (endpoint: HostEndpoint): boolean =>
  endpoint.spec.interfaceName === ALL_INTERFACES && !isAutomatic(endpoint);
