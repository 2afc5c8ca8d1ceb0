// The names of what the policy part puts in `inet netplug`: fixed ones for the base chains,
// dispatch chains and maps; per endpoint its host interface; per policy, profile and set a hash
// of what it is (its key, or its content), so a name stays the same while the thing does, and the
// writer's difference of two parts is small.
import { createHash } from 'node:crypto';

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

/** Mark bits: a policy accepted the packet (return to the endpoint chain), or passed it to the next tier. */
export const MARK = { accept: 0x10000, pass: 0x20000 } as const;

const hashes = new Map<string, string>();

/** 16 hex digits of SHA-256: distinct for distinct texts in practice, short enough for names and prefixes. */
export function hashOf(text: string): string {
  let hash = hashes.get(text);
  if (hash === undefined) {
    hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
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
  return `${direction === 'ingress' ? 'pli' : 'plo'}-${createHash('sha256').update(rulesText).digest('hex').slice(0, 16)}`;
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

/** `tw-<iface>` (to the workload: its ingress) or `fw-<iface>` (from it: its egress). */
export function endpointChainName(interfaceName: string, direction: Direction): string {
  const id = IFACE.test(interfaceName) ? interfaceName : hashOf(interfaceName);
  return `${direction === 'ingress' ? 'tw' : 'fw'}-${id}`;
}
