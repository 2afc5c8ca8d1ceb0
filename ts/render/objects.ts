// What the renderers produce: plain Kubernetes objects, serialised by whoever ships them (the
// manifest generator as YAML, the operator by server-side apply).
export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
};

export type Datastore = 'kubernetes' | 'etcdv3';

export interface RenderOptions {
  datastore: Datastore;
  /** The namespace of every namespaced object: kube-system for the manifests. */
  namespace: string;
  /** The image every container runs (built by `npm run build:image`). */
  image: string;
}

export const NODE = 'netplug-node';
export const CONTROLLERS = 'netplug-kube-controllers';
export const CNI_PLUGIN = 'netplug-cni-plugin';
export const CONFIG_MAP = 'netplug-config';
export const ETCD_SECRET = 'netplug-etcd-secrets';
export const CONF_NAME = '10-netplug.conflist';
/** The reference's override of the API server address for host-network components (optional). */
export const SERVICE_ENDPOINT_CONFIG_MAP = 'kubernetes-services-endpoint';

export const labelsOf = (app: string) => ({ 'k8s-app': app });

/** Where `npm run build:image` puts the image: a local name, never pulled from a registry. */
export const IMAGE_REPOSITORY = 'localhost/netplug';
