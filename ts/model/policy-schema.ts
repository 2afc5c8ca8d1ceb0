// The policy resources' schemas (zod), one per kind: every field checked, selectors parsed, unknown
// fields refused (a misspelt `namespaceselector` would otherwise widen a rule silently). Used by
// netplugctl before anything is written and by the agent on what it reads (a document that fails
// is reported and skipped). The CRDs (deploy/crds/) refuse the same shapes where a schema can.
import * as z from 'zod/mini';

import { parseIp, parsePrefix } from '../net/cidr.ts';
import { LABEL_KEY, parseSelector, SelectorError } from '../selectors/parse.ts';
import {
  ACTIONS,
  PORT_PROTOCOLS,
  POLICY_TYPES,
  PROTOCOL_NUMBERS,
  TIER_ACTIONS,
  type EntityRule,
  type PolicyRule,
  type PolicySpec,
  type Protocol,
} from './policy.ts';

/** A Kubernetes object name (DNS subdomain): what both datastores accept. */
const RESOURCE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** A namespace name (DNS label). */
export const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A named port (an IANA service name, as Kubernetes container ports have them). */
const PORT_NAME = /^(?=.*[a-z])[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$/;
const PORT_RANGE = /^(\d{1,5}):(\d{1,5})$/;
const PORT_NUMBER = /^\d{1,5}$/;

const PROTOCOLS_TEXT = `${Object.keys(PROTOCOL_NUMBERS).join(', ')} or a number from 1 to 255`;

/** The CRDs' limits (deploy/crds/), so that what netplugctl accepts the API server accepts too. */
const LIMITS = { rules: 256, nets: 256, ports: 64, selector: 4096 } as const;

const selectorText = (allowGlobal = false) =>
  z.string('must be a selector (a string)').check(
    z.maxLength(LIMITS.selector, `must be at most ${LIMITS.selector} characters`),
    z.superRefine((value, ctx) => {
      try {
        parseSelector(value, { allowGlobal });
      } catch (err) {
        if (!(err instanceof SelectorError)) throw err;
        ctx.addIssue({ code: 'custom', message: `is not a selector: ${err.message}`, input: value });
      }
    }),
  );

/** A CIDR or a single address (a /32 or /128). */
export function parseNet(text: string): { family: 4 | 6; base: bigint; length: number } | undefined {
  if (!text.includes('/')) {
    const ip = parseIp(text);
    return ip && { family: ip.family, base: ip.value, length: ip.family === 4 ? 32 : 128 };
  }
  return parsePrefix(text);
}

const net = z
  .string('must be a CIDR such as 10.0.0.0/8 or fd00::/64 (a string)')
  .check(z.refine((text) => parseNet(text) !== undefined, 'must be a CIDR such as 10.0.0.0/8 or fd00::/64, or an address'));
const nets = z.array(net, 'must be a list of CIDRs').check(z.maxLength(LIMITS.nets, `must list at most ${LIMITS.nets} CIDRs`));

export const protocolNumber = (protocol: Protocol): number =>
  typeof protocol === 'number' ? protocol : PROTOCOL_NUMBERS[protocol as keyof typeof PROTOCOL_NUMBERS];

const protocol = z.union(
  [z.enum(Object.keys(PROTOCOL_NUMBERS) as [keyof typeof PROTOCOL_NUMBERS]), z.int().check(z.minimum(1), z.maximum(255))],
  `must be ${PROTOCOLS_TEXT}`,
);

/** A port entry: the number, the range or the name it stands for; undefined when it is none. */
export function parsePort(port: unknown): { from: number; to: number } | { name: string } | undefined {
  if (typeof port === 'number') return Number.isInteger(port) && port >= 0 && port <= 65535 ? { from: port, to: port } : undefined;
  if (typeof port !== 'string') return undefined;
  if (PORT_NUMBER.test(port)) return parsePort(Number(port));
  const range = PORT_RANGE.exec(port);
  if (range) {
    const [from, to] = [Number(range[1]), Number(range[2])];
    return from <= to && to <= 65535 ? { from, to } : undefined;
  }
  return PORT_NAME.test(port) ? { name: port } : undefined;
}

const port = z
  .union([z.int(), z.string()], 'must be a port number, a range "from:to" or a port name')
  .check(
    z.refine((value) => parsePort(value) !== undefined, 'must be a port from 0 to 65535, a range "from:to" (from ≤ to) or a port name'),
  );

const ports = z.array(port, 'must be a list of ports').check(z.maxLength(LIMITS.ports, `must list at most ${LIMITS.ports} ports`));

const labels = z.record(
  z.string().check(z.regex(LABEL_KEY, 'must be label keys (letters, digits, "-", "_", "." and "/")')),
  z.string('must be a string'),
  'must be an object of label keys to strings',
);

const icmp = z.strictObject({
  type: z.optional(z.int().check(z.minimum(0), z.maximum(254))),
  code: z.optional(z.int().check(z.minimum(0), z.maximum(255))),
});

const entityRule = z.strictObject({
  nets: z.optional(nets),
  notNets: z.optional(nets),
  selector: z.optional(selectorText()),
  notSelector: z.optional(selectorText()),
  namespaceSelector: z.optional(selectorText(true)),
  serviceAccounts: z.optional(
    z.strictObject({
      names: z.optional(
        z
          .array(z.string().check(z.regex(RESOURCE_NAME, 'must be service account names')))
          .check(z.maxLength(256, 'must list at most 256 names')),
      ),
      selector: z.optional(selectorText()),
    }),
  ),
  ports: z.optional(ports),
  notPorts: z.optional(ports),
});

const family = (text: string) => parseNet(text)?.family;

const rule = z
  .strictObject({
    action: z.enum(ACTIONS, `must be one of ${ACTIONS.join(', ')}`),
    protocol: z.optional(protocol),
    notProtocol: z.optional(protocol),
    ipVersion: z.optional(z.union([z.literal(4), z.literal(6)], 'must be 4 or 6')),
    icmp: z.optional(icmp),
    notICMP: z.optional(icmp),
    source: z.optional(entityRule),
    destination: z.optional(entityRule),
    metadata: z.optional(z.strictObject({ annotations: z.optional(z.record(z.string(), z.string())) })),
  })
  .check(z.superRefine((value, ctx) => ruleConsistency(value as PolicyRule, ctx)));

/** What a schema of one field cannot see: how a rule's fields fit together. */
function ruleConsistency(rule: PolicyRule, ctx: z.core.$RefinementCtx<unknown>): void {
  const issue = (path: PropertyKey[], message: string, input: unknown) => ctx.addIssue({ code: 'custom', path, message, input });
  const number = rule.protocol === undefined ? undefined : protocolNumber(rule.protocol);
  for (const side of ['source', 'destination'] as const) {
    const entity: EntityRule | undefined = rule[side];
    for (const field of ['ports', 'notPorts'] as const) {
      if (entity?.[field] && entity[field].length > 0 && (number === undefined || !PORT_PROTOCOLS.includes(number)))
        issue(['protocol'], `must be TCP, UDP, SCTP or UDPLite when ${side}.${field} is given (ports exist only for those)`, rule.protocol);
    }
    for (const field of ['nets', 'notNets'] as const) {
      entity?.[field]?.forEach((text, i) => {
        if (rule.ipVersion !== undefined && family(text) !== undefined && family(text) !== rule.ipVersion)
          issue([side, field, i], `must be an IPv${rule.ipVersion} CIDR (the rule's ipVersion)`, text);
      });
    }
  }
  for (const field of ['icmp', 'notICMP'] as const) {
    const match = rule[field];
    if (!match) continue;
    if (number !== 1 && number !== 58) issue(['protocol'], `must be ICMP or ICMPv6 when ${field} is given`, rule.protocol);
    if (match.code !== undefined && match.type === undefined) issue([field, 'code'], 'needs a type beside it', match.code);
  }
  const icmpFamily = number === 1 ? 4 : number === 58 ? 6 : undefined;
  if (icmpFamily !== undefined && rule.ipVersion !== undefined && rule.ipVersion !== icmpFamily)
    issue(['ipVersion'], `must be ${icmpFamily} for protocol ${String(rule.protocol)}`, rule.ipVersion);
}

const rules = z.array(rule, 'must be a list of rules').check(z.maxLength(LIMITS.rules, `must hold at most ${LIMITS.rules} rules`));

const metadata = (namespaced: boolean) =>
  z.looseObject({
    name: z.string('is required (a name)').check(z.regex(RESOURCE_NAME, 'must be lower-case letters, digits, "-" and "." (at most 253)')),
    namespace: namespaced
      ? z.optional(z.string().check(z.regex(NAMESPACE_NAME, 'must be a namespace name')))
      : z.optional(z.undefined('must be absent: the kind is not namespaced')),
    labels: z.optional(labels),
    annotations: z.optional(z.record(z.string(), z.string(), 'must be an object of strings')),
  });

const types = z
  .array(z.enum(POLICY_TYPES, 'must be Ingress or Egress'), 'must be a list of Ingress and Egress')
  .check(z.refine((list) => new Set(list).size === list.length, 'must not name a type twice'));
const order = z.number('must be a number').check(z.refine((n) => Number.isFinite(n), 'must be a finite number'));
const tierName = z.string().check(z.regex(RESOURCE_NAME, 'must be a tier name'));

/** GlobalNetworkPolicy's flags for host endpoints (applyOnForward, preDNAT, doNotTrack); a NetworkPolicy has none. */
const hostEndpointFlag = (global: boolean) =>
  global
    ? z.optional(z.boolean('must be true or false'))
    : z.optional(z.undefined('must be absent: only a GlobalNetworkPolicy has it (a flag for host endpoints)'));

const policySpec = (global: boolean) =>
  z
    .strictObject({
      tier: z.optional(tierName),
      order: z.optional(order),
      selector: z.optional(selectorText()),
      ...(global ? { namespaceSelector: z.optional(selectorText(true)) } : {}),
      serviceAccountSelector: z.optional(selectorText()),
      types: z.optional(types),
      ingress: z.optional(rules),
      egress: z.optional(rules),
      applyOnForward: hostEndpointFlag(global),
      preDNAT: hostEndpointFlag(global),
      doNotTrack: hostEndpointFlag(global),
    })
    .check(
      z.superRefine((value, ctx) => {
        const spec = value as PolicySpec;
        hostEndpointConsistency(spec, ctx);
        for (const [field, type] of [
          ['ingress', 'Ingress'],
          ['egress', 'Egress'],
        ] as const) {
          if (spec.types && (spec[field]?.length ?? 0) > 0 && !spec.types.includes(type))
            ctx.addIssue({
              code: 'custom',
              path: ['types'],
              message: `must include ${type}: the policy has ${field} rules`,
              input: spec.types,
            });
        }
      }),
    );

/**
 * How the host endpoint flags fit together, as Calico has them: preDNAT and doNotTrack exclude each
 * other and each needs applyOnForward; a preDNAT policy is for ingress only.
 */
function hostEndpointConsistency(spec: PolicySpec, ctx: z.core.$RefinementCtx<unknown>): void {
  const issue = (path: PropertyKey[], message: string, input: unknown) => ctx.addIssue({ code: 'custom', path, message, input });
  if (spec.preDNAT === true && spec.doNotTrack === true)
    issue(['doNotTrack'], 'must not be true with preDNAT: true (a policy is applied before DNAT or untracked, not both)', spec.doNotTrack);
  for (const flag of ['preDNAT', 'doNotTrack'] as const) {
    if (spec[flag] === true && spec.applyOnForward !== true)
      issue(['applyOnForward'], `must be true when ${flag} is true (${flag} policies apply to forwarded traffic too)`, spec.applyOnForward);
  }
  if (spec.preDNAT !== true) return;
  if ((spec.egress?.length ?? 0) > 0)
    issue(['egress'], 'must be empty when preDNAT is true (a preDNAT policy has ingress rules only)', spec.egress);
  if (spec.types?.includes('Egress'))
    issue(['types'], 'must not include Egress when preDNAT is true (a preDNAT policy applies to ingress only)', spec.types);
}

const apiVersion = z.literal('projectnet.org/v3', 'must be projectnet.org/v3');

export const policySchemas = {
  NetworkPolicy: z.looseObject({
    kind: z.literal('NetworkPolicy'),
    apiVersion,
    metadata: metadata(true),
    spec: policySpec(false),
  }),
  GlobalNetworkPolicy: z.looseObject({
    kind: z.literal('GlobalNetworkPolicy'),
    apiVersion,
    metadata: metadata(false),
    spec: policySpec(true),
  }),
  NetworkSet: z.looseObject({
    kind: z.literal('NetworkSet'),
    apiVersion,
    metadata: metadata(true),
    spec: z.strictObject({ nets: z.optional(nets) }),
  }),
  GlobalNetworkSet: z.looseObject({
    kind: z.literal('GlobalNetworkSet'),
    apiVersion,
    metadata: metadata(false),
    spec: z.strictObject({ nets: z.optional(nets) }),
  }),
  Tier: z.looseObject({
    kind: z.literal('Tier'),
    apiVersion,
    metadata: metadata(false),
    spec: z
      .strictObject({
        order: z.optional(order),
        defaultAction: z.optional(z.enum(TIER_ACTIONS, `must be ${TIER_ACTIONS.join(' or ')}`)),
      })
      .check(
        z.superRefine((spec, ctx) => {
          // The spec cannot see the name; checkPolicyDocument adds what the default tier may not change.
          if (spec.order !== undefined && spec.order <= 0)
            ctx.addIssue({ code: 'custom', path: ['order'], message: 'must be greater than 0', input: spec.order });
        }),
      ),
  }),
  Profile: z.looseObject({
    kind: z.literal('Profile'),
    apiVersion,
    metadata: metadata(false),
    spec: z.strictObject({
      labelsToApply: z.optional(labels),
      ingress: z.optional(rules),
      egress: z.optional(rules),
    }),
  }),
};
