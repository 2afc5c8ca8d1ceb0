// Node names: whichever source the node's name comes from (plugin/nodename.ts) must be a name
// Kubernetes accepts for a Node: it keys IPAM metadata and datastore paths, so `a/b` or `../../x`
// must never pass.
/** Kubernetes' DNS-1123 subdomain (IsDNS1123Subdomain), the rule for Node names. */
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const MAX_NODE_NAME_LENGTH = 253;

export const NODE_NAME_RULE =
  "must be a Kubernetes node name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit)";

export const isNodeName = (name: string): boolean => name.length <= MAX_NODE_NAME_LENGTH && DNS1123_SUBDOMAIN.test(name);
