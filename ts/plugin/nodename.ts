// The node's name: the netconf's `nodename`, else the file the node agent writes, else the host
// name (lower-cased), in the reference's order. Whichever it is must be a name Kubernetes accepts
// for a Node (config/nodename.ts): it keys IPAM metadata and datastore paths, so `a/b` or
// `../../x` must never pass. Here rather than in config/ because it reads the host.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

import { CniError, ErrorCode, quote } from '../cni/errors.ts';
import { isNodeName, NODE_NAME_RULE } from '../config/nodename.ts';

const NODENAME_FILE = '/var/lib/netplug/nodename';

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
