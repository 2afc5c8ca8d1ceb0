// CNI results: one model (the 1.1.0 shape), printed in whatever version the runtime asked for,
// and read from whatever version a delegated plugin or prevResult carries. Mirrors
// containernetworking/cni pkg/types/{020,040,100} and their converters.
import * as z from 'zod/mini';

import { CniError, ErrorCode } from './errors.ts';
import { atLeast } from './versions.ts';

interface Interface {
  name: string;
  mac?: string;
  mtu?: number;
  sandbox?: string;
  socketPath?: string;
  pciID?: string;
}

interface IpConfig {
  /** CIDR: the address with its prefix length. */
  address: string;
  gateway?: string;
  /** Index into `interfaces`. */
  interface?: number;
}

interface Route {
  dst: string;
  gw?: string;
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

interface Dns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

export interface Result {
  cniVersion: string;
  interfaces?: Interface[];
  ips?: IpConfig[];
  routes?: Route[];
  dns?: Dns;
}

const familyOf = (cidrOrIp: string): '4' | '6' => (cidrOrIp.includes(':') ? '6' : '4');

/** The result as the given spec version spells it. */
export function formatResult(result: Result, version: string): Record<string, unknown> {
  if (!atLeast(version, '0.3.0')) return formatLegacy(result, version);
  const modern = atLeast(version, '1.1.0');
  const out: Record<string, unknown> = { cniVersion: version };
  if (result.interfaces?.length) {
    out['interfaces'] = result.interfaces.map((i) =>
      modern ? compact({ ...i }) : compact({ name: i.name, mac: i.mac, sandbox: i.sandbox }),
    );
  }
  if (result.ips?.length) {
    out['ips'] = result.ips.map((ip) =>
      compact({
        ...(atLeast(version, '1.0.0') ? {} : { version: familyOf(ip.address) }),
        interface: ip.interface,
        address: ip.address,
        gateway: ip.gateway,
      }),
    );
  }
  if (result.routes?.length) {
    out['routes'] = result.routes.map((r) => (modern ? compact({ ...r }) : compact({ dst: r.dst, gw: r.gw })));
  }
  out['dns'] = compact({ ...(result.dns ?? {}) });
  return out;
}

/** 0.1.0 and 0.2.0 carry one IPv4 and one IPv6 address, with the routes of each family. */
function formatLegacy(result: Result, version: string): Record<string, unknown> {
  const first = (family: '4' | '6') => result.ips?.find((ip) => familyOf(ip.address) === family);
  const section = (family: '4' | '6') => {
    const ip = first(family);
    if (!ip) return undefined;
    const routes = (result.routes ?? []).filter((r) => familyOf(r.dst) === family).map((r) => compact({ dst: r.dst, gw: r.gw }));
    return compact({ ip: ip.address, gateway: ip.gateway, routes: routes.length ? routes : undefined });
  };
  const [ip4, ip6] = [section('4'), section('6')];
  if (!ip4 && !ip6) {
    throw new CniError(ErrorCode.IncompatibleVersion, `a result without addresses cannot be expressed in CNI ${version}`);
  }
  return compact({ cniVersion: version, ip4, ip6, dns: compact({ ...(result.dns ?? {}) }) });
}

/** The object without its undefined properties, so that JSON output and comparisons stay exact. */
function compact<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as never;
}

// Built on first use: printing a result (every ADD) needs none of them, and building zod schemas
// costs a plugin process time on the pod's path.
function buildSchemas() {
  const str = () => z.string();
  const int = () => z.number().check(z.int());
  const dnsSchema = z.optional(
    z.looseObject({
      nameservers: z.optional(z.array(str())),
      domain: z.optional(str()),
      search: z.optional(z.array(str())),
      options: z.optional(z.array(str())),
    }),
  );
  const routeSchema = z.looseObject({
    dst: str(),
    gw: z.optional(str()),
    mtu: z.optional(int()),
    advmss: z.optional(int()),
    priority: z.optional(int()),
    table: z.optional(int()),
    scope: z.optional(int()),
  });
  const legacyIpSchema = z.looseObject({ ip: str(), gateway: z.optional(str()), routes: z.optional(z.array(routeSchema)) });
  const legacy = z.looseObject({ ip4: z.optional(legacyIpSchema), ip6: z.optional(legacyIpSchema), dns: dnsSchema });
  const current = z.looseObject({
    interfaces: z.optional(
      z.array(
        z.looseObject({
          name: str(),
          mac: z.optional(str()),
          mtu: z.optional(int()),
          sandbox: z.optional(str()),
          socketPath: z.optional(str()),
          pciID: z.optional(str()),
        }),
      ),
    ),
    ips: z.optional(z.array(z.looseObject({ address: str(), gateway: z.optional(str()), interface: z.optional(int()) }))),
    routes: z.optional(z.array(routeSchema)),
    dns: dnsSchema,
  });
  return { legacy, current };
}

let schemas: ReturnType<typeof buildSchemas> | undefined;

/**
 * Reads a result of any version (a prevResult, or what a delegated plugin printed) into the
 * model. `what` names its origin in errors.
 */
export function parseResult(value: unknown, version: string, what: string): Result {
  const legacy = !atLeast(version, '0.3.0');
  schemas ??= buildSchemas();
  const parsed = (legacy ? schemas.legacy : schemas.current).safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.join('.') || '(top level)';
    throw new CniError(ErrorCode.DecodingFailure, `${what} is not a CNI ${version} result: ${path}: ${issue?.message}`);
  }
  if (legacy) {
    const data = parsed.data as z.output<ReturnType<typeof buildSchemas>['legacy']>;
    const result: Result = { cniVersion: version, ips: [], routes: [] };
    for (const section of [data.ip4, data.ip6]) {
      if (!section) continue;
      result.ips?.push(section.gateway ? { address: section.ip, gateway: section.gateway } : { address: section.ip });
      result.routes?.push(...(section.routes ?? []).map((r) => compact({ dst: r.dst, gw: r.gw })));
    }
    if (data.dns) result.dns = data.dns;
    return result;
  }
  const data = parsed.data as z.output<ReturnType<typeof buildSchemas>['current']>;
  const result: Result = { cniVersion: version };
  if (data.interfaces) result.interfaces = data.interfaces.map((i) => compact({ ...i }));
  if (data.ips) {
    result.ips = data.ips.map((ip) => compact({ address: ip.address, gateway: ip.gateway, interface: ip.interface }));
  }
  if (data.routes) result.routes = data.routes.map((r) => compact({ ...r }));
  if (data.dns) result.dns = data.dns;
  return result;
}
