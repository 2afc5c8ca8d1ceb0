// KubeControllersConfiguration `default`: what netplug-kube-controllers is asked to do
// (whether to keep automatic host endpoints), and in its status what it runs with. A native custom
// resource on the Kubernetes datastore (deploy/crds/kubecontrollersconfigurations.yaml).
import * as z from 'zod/mini';

import { checkedBySchema, metadataSchema } from './checked-schema.ts';
import type { Entry } from './entry.ts';
import { keys } from './keys.ts';

export const CONFIGURATION_NAME = 'default';
export const CONFIGURATION_KEY = keys.kubeControllersConfiguration;

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
  metadata: metadataSchema,
  spec: controllersSchema,
  status: z.optional(z.looseObject({ runningConfig: z.optional(controllersSchema) })),
});
export type ControllersConfiguration = z.infer<typeof configurationSchema>;
export type ControllersSpec = z.infer<typeof controllersSchema>;

export const checkedConfiguration = (entry: Entry<unknown>): Entry<ControllersConfiguration> =>
  checkedBySchema(configurationSchema, 'KubeControllersConfiguration', entry);

/** What the configuration says (absent fields: Disabled, the default). */
export const autoCreateOf = (spec: ControllersSpec | undefined): AutoCreate =>
  spec?.controllers?.node?.hostEndpoint?.autoCreate ?? 'Disabled';

/** `autoCreate` as a configuration spec holds it. */
export const autoCreateSpec = (value: AutoCreate): ControllersSpec => ({ controllers: { node: { hostEndpoint: { autoCreate: value } } } });
