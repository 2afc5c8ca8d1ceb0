// The node's name: the netconf's `nodename`, else the file the node agent writes, else the host
// name (lower-cased), in the reference's order.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

export const NODENAME_FILE = '/var/lib/netplug/nodename';

export function nodeName(configured: string | undefined): string {
  if (configured) return configured;
  try {
    const fromFile = readFileSync(NODENAME_FILE, 'utf8').trim();
    if (fromFile) return fromFile;
  } catch {
    // no node agent file: the host name it is
  }
  return hostname().trim().toLowerCase();
}
