// The names of what the policy part puts in `inet netplug`: fixed ones for the base chains,
// dispatch chains and maps; per endpoint its host interface; per policy, profile and set a hash
// of what it is (its key, or its content), so a name stays the same while the thing does, and the
// writer's difference of two parts is small.
import { hash as digest } from 'node:crypto';

import type { Direction } from './program.ts';

/** The contributor name of this part of netplug's table. */
export const POLICY_PART = 'policy';

export const CHAINS = {
  forward: 'filter-forward',
  input: 'filter-input',
  output: 'filter-output',
  fromDispatch: 'from-wl-dispatch',
  toDispatch: 'to-wl-dispatch',
  /** ICMPv6 neighbour discovery, accepted for every endpoint before conntrack (it has no conntrack state). */
  neighbourDiscovery: 'wl-icmpv6-nd',
} as const;

export const MAPS = { from: 'from-wl', to: 'to-wl' } as const;

/**
 * Mark bits: a policy accepted the packet (return to the endpoint chain), or passed it to the next
 * tier; a host endpoint's doNotTrack policy allowed it (untracked: the filter hooks accept it).
 */
export const MARK = { accept: 0x10000, pass: 0x20000, untracked: 0x40000 } as const;

const hashes = new Map<string, string>();

/** 16 hex digits of SHA-256: distinct for distinct texts in practice, short enough for names and prefixes. */
export function hashOf(text: string): string {
  let hash = hashes.get(text);
  if (hash === undefined) {
    hash = digest('sha256', text, 'hex').slice(0, 16);
    if (hashes.size > 200_000) hashes.clear();
    hashes.set(text, hash);
  }
  return hash;
}

/** `pi-<hash>` (ingress) or `po-<hash>` (egress) of a policy; `pri-`/`pro-` of a profile. */
export function policyChainName(key: string, direction: Direction): string {
  const profile = key.startsWith('Profile/');
  const prefix = direction === 'ingress' ? (profile ? 'pri' : 'pi') : profile ? 'pro' : 'po';
  return `${prefix}-${hashOf(key)}`;
}

/**
 * `pli-<hash>` (ingress) or `plo-<hash>` (egress) of a policy list chain, by its rules' text
 * (hashed each time: the texts are long and short-lived, not worth keeping).
 */
export function policyListChainName(direction: Direction, rulesText: string): string {
  return `${direction === 'ingress' ? 'pli' : 'plo'}-${digest('sha256', rulesText, 'hex').slice(0, 16)}`;
}

/** The named counter of the packets a policy's Deny rules dropped. */
export const denyCounterName = (key: string): string => `deny-${hashOf(key)}`;

/**
 * Named counters of the drops no policy rule decided, shared by every endpoint chain (what
 * Kubernetes NetworkPolicy denies, having no Deny rule, is counted here).
 */
export const DEFAULT_DENY_COUNTERS = {
  /** No policy of a tier (nor, after the tiers, a profile) allowed the packet. */
  noPolicyAllowed: 'default-deny',
  /** A workload interface not in the dispatch maps (fail closed). */
  failClosed: 'fail-closed',
} as const;

const IFACE = /^[A-Za-z0-9_.-]{1,15}$/;

/** The chains of host endpoints, created while this node has one (ts/policy/host-chains.ts). */
export const HOST_CHAINS = {
  input: 'host-input',
  output: 'host-output',
  forward: 'host-forward',
  fromForward: 'from-host-forward',
  toForward: 'to-host-forward',
  preDnat: 'host-pre-dnat',
  rawPrerouting: 'host-raw-prerouting',
  rawOutput: 'host-raw-output',
  untrackedIn: 'from-host-untracked',
  untrackedOut: 'to-host-untracked',
  failsafeIn: 'failsafe-in',
  failsafeOut: 'failsafe-out',
} as const;

/** The chain kinds of a host endpoint: its own traffic, forwarded traffic, before DNAT, before conntrack. */
export type HostChainKind = 'host' | 'forward' | 'preDNAT' | 'untracked';

const HOST_PREFIXES: Record<HostChainKind, Record<Direction, string>> = {
  host: { ingress: 'fh', egress: 'th' },
  forward: { ingress: 'fhfw', egress: 'thfw' },
  preDNAT: { ingress: 'fhpd', egress: 'thpd' },
  untracked: { ingress: 'fhnt', egress: 'thnt' },
};

/**
 * A host endpoint's chain: `fh-<iface>` (from the host endpoint: its ingress) or `th-<iface>`
 * (to it: its egress), `fhfw-`/`thfw-` forwarded, `fhpd-` before DNAT, `fhnt-`/`thnt-` untracked;
 * all interfaces (`*`) by a hash, which no interface name (15 characters at most) can equal.
 */
export function hostChainName(interfaceName: string, kind: HostChainKind, direction: Direction): string {
  const id = IFACE.test(interfaceName) ? interfaceName : hashOf(interfaceName);
  return `${HOST_PREFIXES[kind][direction]}-${id}`;
}

/** `tw-<iface>` (to the workload: its ingress) or `fw-<iface>` (from it: its egress). */
export function endpointChainName(interfaceName: string, direction: Direction): string {
  const id = IFACE.test(interfaceName) ? interfaceName : hashOf(interfaceName);
  return `${direction === 'ingress' ? 'tw' : 'fw'}-${id}`;
}
