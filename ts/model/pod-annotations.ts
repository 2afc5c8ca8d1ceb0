// The pod and namespace annotations that steer a pod's addresses, by name: the plugin reads them
// (ts/k8s/annotations.ts gives their rules) and the admission policy the manifests ship names two.

export const ANNOTATIONS = {
  ipv4pools: 'cni.projectnet.org/ipv4pools',
  ipv6pools: 'cni.projectnet.org/ipv6pools',
  ipAddrs: 'cni.projectnet.org/ipAddrs',
  ipAddrsNoIpam: 'cni.projectnet.org/ipAddrsNoIpam',
  floatingIPs: 'cni.projectnet.org/floatingIPs',
} as const;
