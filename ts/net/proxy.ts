// The proxy for a URL from the environment, as curl and Go's net/http read it: HTTPS_PROXY (or
// https_proxy) for https targets, HTTP_PROXY (or http_proxy) for http ones, unless NO_PROXY (or
// no_proxy) names the host. NO_PROXY entries, comma- or space-separated: `*` (no proxy at all);
// a domain, matching itself and its subdomains, with or without a leading dot; an IP address or
// a CIDR matching IP targets; each optionally with `:port`, then matching only that port.
// Used for the Kubernetes API only: etcd and readiness gates are node-local or cluster-internal.
// node:net (for its IP parsing) is loaded only when a proxy is set: it brings Node's stream stack.
const net = () => process.getBuiltinModule('node:net');

export function proxyFor(target: URL, env: NodeJS.ProcessEnv = process.env): URL | undefined {
  const https = target.protocol === 'https:';
  const setting = https ? (env['HTTPS_PROXY'] ?? env['https_proxy']) : (env['HTTP_PROXY'] ?? env['http_proxy']);
  if (!setting) return undefined;
  if (bypassed(target, env['NO_PROXY'] ?? env['no_proxy'] ?? '')) return undefined;
  // A bare `host:port` means http://host:port, as curl and Go take it.
  let proxy: URL;
  try {
    proxy = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(setting) ? setting : `http://${setting}`);
  } catch {
    throw new Error(`${https ? 'HTTPS_PROXY' : 'HTTP_PROXY'} is not a URL such as http://proxy:3128`);
  }
  if (proxy.protocol !== 'http:' && proxy.protocol !== 'https:') {
    throw new Error(`${https ? 'HTTPS_PROXY' : 'HTTP_PROXY'} "${proxy.origin}" must be an http:// or https:// proxy`);
  }
  return proxy;
}

function bypassed(target: URL, noProxy: string): boolean {
  const { isIP } = net();
  const host = target.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = target.port || (target.protocol === 'https:' ? '443' : '80');
  for (const raw of noProxy.split(/[\s,]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return true;
    const [name, entryPort] = splitPort(entry);
    if (entryPort && entryPort !== port) continue;
    if (matchesIp(host, name)) return true;
    const domain = name.replace(/^\*?\./, '');
    if (domain && !isIP(host) && (host === domain || host.endsWith(`.${domain}`))) return true;
  }
  return false;
}

/** `[::1]:80`, `10.0.0.0/8`, `example.com:443`, `::1` into name and port. */
function splitPort(entry: string): [string, string | undefined] {
  const { isIP } = net();
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return [bracketed[1] as string, bracketed[2]];
  if (isIP(entry) === 6 || (entry.includes('/') && entry.split(':').length > 2)) return [entry, undefined];
  const colon = /^(.*):(\d+)$/.exec(entry);
  return colon ? [colon[1] as string, colon[2]] : [entry, undefined];
}

function matchesIp(host: string, entry: string): boolean {
  const { BlockList, isIP } = net();
  const family = isIP(host);
  if (!family) return false;
  const type = family === 6 ? 'ipv6' : 'ipv4';
  const [address, bits] = entry.split('/');
  if (!address || isIP(address) !== family) return false;
  if (bits === undefined) {
    const list = new BlockList();
    list.addAddress(address, type);
    return list.check(host, type);
  }
  const prefix = Number(bits);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32)) return false;
  const list = new BlockList();
  list.addSubnet(address, prefix, type);
  return list.check(host, type);
}
