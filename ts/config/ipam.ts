// The `ipam` section: netplug-ipam's options, host-local's, or any other IPAM plugin's (passed
// through to it untouched).
import * as z from 'zod/mini';

import { isCidr } from './cidr.ts';
import { configError, describeIssues } from './issues.ts';

const POD_CIDR_VALUES = ['usepodcidr', 'usepodcidripv6'];
const isPodCidrValue = (text: string) => POD_CIDR_VALUES.includes(text.toLowerCase());

// Strings, not booleans, as in the specification (and the reference, which rejects booleans).
const stringBoolean = (fallback: 'true' | 'false') =>
  z._default(
    z.custom<'true' | 'false'>((value) => value === 'true' || value === 'false', {
      error: (issue) =>
        typeof issue.input === 'boolean' ? 'must be the string "true" or "false", not a JSON boolean' : 'must be "true" or "false"',
    }),
    fallback,
  );

const poolList = z.optional(z.array(z.string().check(z.minLength(1, { error: 'must name a pool or give its CIDR' }))));

const netplugIpamSchema = z.object({
  type: z.literal('netplug-ipam'),
  assign_ipv4: stringBoolean('true'),
  assign_ipv6: stringBoolean('false'),
  ipv4_pools: poolList,
  ipv6_pools: poolList,
});

const cidr = () => z.string().check(z.refine(isCidr, { error: 'must be a CIDR such as 10.0.0.0/16' }));
const ipamRoutes = z.optional(z.array(z.object({ dst: cidr(), gw: z.optional(z.unknown()) })));
const noPodCidr = () =>
  z.optional(
    z
      .string()
      .check(
        z.refine((value) => !isPodCidrValue(value), { error: 'cannot be usePodCidr or usePodCidrIPv6; those are valid only in subnet' }),
      ),
  );
const subnet = () =>
  z.string().check(z.refine((value) => isPodCidrValue(value) || isCidr(value), { error: 'must be a CIDR, usePodCidr or usePodCidrIPv6' }));

// What host-local itself refuses is refused here too, with error 7 naming the field, rather than
// passed on as host-local's own error after it has started.
const hostLocalSchema = z
  .object({
    type: z.literal('host-local'),
    subnet: z.optional(subnet()),
    rangeStart: noPodCidr(),
    rangeEnd: noPodCidr(),
    ranges: z.optional(
      z
        .array(
          z
            .array(z.object({ subnet: subnet(), rangeStart: noPodCidr(), rangeEnd: noPodCidr(), gateway: z.optional(z.unknown()) }))
            .check(z.minLength(1, { error: 'must not hold an empty range set' })),
        )
        .check(z.minLength(1, { error: 'must list at least one range set' })),
    ),
    routes: ipamRoutes,
    gateway: z.optional(z.unknown()),
    dataDir: z.optional(
      z.string().check(
        z.minLength(1),
        z.refine((dir) => !dir.includes('\0'), { error: 'must be a directory path without NUL characters' }),
      ),
    ),
  })
  .check(
    z.refine((ipam) => ipam.subnet !== undefined || ipam.ranges !== undefined, {
      error: 'host-local needs "subnet" or "ranges"',
    }),
  );

/** Any other IPAM plugin: only its type and, if it has them, routes matter to netplug. */
const delegatedSchema = z.object({ type: z.string().check(z.minLength(1)), routes: ipamRoutes });

export type NetplugIpamConfig = z.output<typeof netplugIpamSchema>;
type HostLocalIpamConfig = z.output<typeof hostLocalSchema>;
type DelegatedIpamConfig = z.output<typeof delegatedSchema>;
export type IpamConfig = NetplugIpamConfig | HostLocalIpamConfig | DelegatedIpamConfig;

export function parseIpam(ipam: { type: string }): IpamConfig {
  // The netplug executable as its own IPAM plugin would run itself again, and again, without end.
  if (ipam.type === 'netplug') {
    throw configError([
      'netconf field "ipam.type" is "netplug": netplug cannot delegate address management to itself; use "netplug-ipam", "host-local" or another IPAM plugin',
    ]);
  }
  const schema = ipam.type === 'netplug-ipam' ? netplugIpamSchema : ipam.type === 'host-local' ? hostLocalSchema : delegatedSchema;
  const parsed = schema.safeParse(ipam, { reportInput: true });
  if (!parsed.success) throw configError(describeIssues(parsed.error.issues, 'ipam'));
  return parsed.data;
}

export const isNetplugIpam = (ipam: IpamConfig): ipam is NetplugIpamConfig => ipam.type === 'netplug-ipam';
