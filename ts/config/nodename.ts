// The node's name: the netconf's `nodename`, else the file the node agent writes, else the host
// name (lower-cased), in the reference's order. Whichever it is must be a name Kubernetes accepts
// for a Node: it keys IPAM metadata and datastore paths, so `a/b` or `../../x` must never pass.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

import { CniError, ErrorCode, quote } from '../cni/errors.ts';

export const NODENAME_FILE = '/var/lib/netplug/nodename';

/** Kubernetes' DNS-1123 subdomain (IsDNS1123Subdomain), the rule for Node names. */
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const MAX_NODE_NAME_LENGTH = 253;

export const NODE_NAME_RULE =
  "must be a Kubernetes node name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit)";

export const isNodeName = (name: string): boolean => name.length <= MAX_NODE_NAME_LENGTH && DNS1123_SUBDOMAIN.test(name);

export function nodeName(configured: string | undefined): string {
  if (configured) return checked(configured, 'netconf field "nodename"');
  let fromFile = '';
  try {
    fromFile = readFileSync(NODENAME_FILE, 'utf8').trim();
  } catch {
    // no node agent file: the host name it is
  }
  if (fromFile) return checked(fromFile, `the node name in ${NODENAME_FILE}`);
  return checked(hostname().trim().toLowerCase(), 'the host name (used without netconf field "nodename")');
}

function checked(name: string, source: string): string {
  if (!isNodeName(name)) throw new CniError(ErrorCode.InvalidConfig, `${source} ${NODE_NAME_RULE}, got ${quote(name)}`);
  return name;
}
