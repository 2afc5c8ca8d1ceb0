// Nodes as the datastore holds them: labels (what pool node selectors match) and addresses.

/**
 * Where a node is reached (netplug-node publishes its own): the reference's field names, so tools
 * that know its Node read ours. Addresses with their prefix length (`10.0.0.1/24`) tell
 * same-subnet peers from cross-subnet ones; tunnel addresses are bare, taken from the pools.
 */
export interface NodeSpec {
  bgp?: { ipv4Address?: string; ipv4IPIPTunnelAddr?: string };
  ipv4VXLANTunnelAddr?: string;
  vxlanTunnelMACAddr?: string;
}

export interface NodeResource {
  kind: 'Node';
  apiVersion: string;
  metadata: { name: string; creationTimestamp: string; labels: Record<string, string> };
  spec: NodeSpec;
  status?: {
    /**
     * On the Kubernetes datastore, the Node's spec.podCIDRs (as the reference's status.podCIDRs):
     * what host-local installs route by (ts/node/routes/). Never written: etcd Nodes have none.
     */
    podCIDRs?: string[];
  };
}
