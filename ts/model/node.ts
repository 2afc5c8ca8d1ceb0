// Nodes as the datastore holds them: labels (what pool node selectors match), addresses, and the
// release the node's agent runs.

/**
 * Where a node is reached (netplug-node publishes its own): the reference's field names, so tools
 * that know its Node read ours. Addresses with their prefix length (`10.0.0.1/24`) tell
 * same-subnet peers from cross-subnet ones; tunnel addresses are bare, taken from the pools.
 */
export interface NodeSpec {
  bgp?: { ipv4Address?: string; ipv6Address?: string; ipv4IPIPTunnelAddr?: string };
  ipv4VXLANTunnelAddr?: string;
  vxlanTunnelMACAddr?: string;
  /** The IPv6 VXLAN device's address and MAC (IPv6 pools with VXLAN), as the reference names them. */
  ipv6VXLANTunnelAddr?: string;
  vxlanTunnelMACAddrV6?: string;
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
    /**
     * The release the node's agent runs, which it records as it starts (ts/node/startup/record-version.ts;
     * on the Kubernetes datastore an annotation on the Node). Status, as what the agent reports rather
     * than what anyone asks of the node; named as ClusterInformation's field, the lowest of them.
     */
    netplugVersion?: string;
  };
}
