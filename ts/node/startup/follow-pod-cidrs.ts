// USE_POD_CIDR=true (host-local installs): addresses come from each Node's spec.podCIDRs, not
// from netplug's pools. The agent records its Node's pod CIDRs in <varDir>/pod-cidrs (one CIDR a
// line, for the routing work that needs them) and is not ready until the Node has some: a
// kubelet or controller-manager that has not assigned one yet would make every pod's ADD fail.
import { join } from 'node:path';

import type * as k8s from '@kubernetes/client-node';

import type { Logger } from '../../log/logger.ts';
import { formatPrefix, parsePrefix } from '../../net/cidr.ts';
import type { NodeFollower } from './follow-node.ts';
import { writeIfChanged } from './write-node-files.ts';

export const POD_CIDRS_FILE = 'pod-cidrs';

/** spec.podCIDRs (else the older spec.podCIDR) in canonical form; what does not parse is left out. */
export function podCidrsOf(node: k8s.V1Node | undefined): string[] {
  const given = node?.spec?.podCIDRs ?? (node?.spec?.podCIDR ? [node.spec.podCIDR] : []);
  return given.flatMap((text) => {
    const prefix = parsePrefix(text);
    return prefix ? [formatPrefix(prefix)] : [];
  });
}

export class PodCidrRecord {
  /** The Node's pod CIDRs as last seen non-empty; undefined until the Node had some. */
  private cidrs: string[] | undefined;
  private problem: string | undefined;
  private readonly varDir: string;
  private readonly nodeName: string;
  private readonly log: Logger;

  constructor(varDir: string, nodeName: string, log: Logger) {
    this.varDir = varDir;
    this.nodeName = nodeName;
    this.log = log;
    this.problem = `waiting for Node "${nodeName}" to be read (USE_POD_CIDR is true: its spec.podCIDRs give the addresses)`;
  }

  /** Why the node is not ready as far as pod CIDRs go, or undefined. */
  notReady(): string | undefined {
    return this.problem;
  }

  /** Follows the Node: each new set of pod CIDRs is recorded. */
  follower(): NodeFollower<string[]> {
    return {
      what: 'pod CIDRs',
      select: podCidrsOf,
      onChange: async (cidrs) => this.record(cidrs),
      onError: (message) => {
        // Once recorded, the CIDRs stand: a Node's pod CIDRs do not change in place.
        if (!this.cidrs) this.problem = `cannot read Node "${this.nodeName}" for its spec.podCIDRs (USE_POD_CIDR is true): ${message}`;
      },
    };
  }

  /** Writes the file again if it was removed, changed or not written (the periodic check of node files). */
  keep(): void {
    if (this.cidrs) this.write(this.cidrs);
  }

  private record(cidrs: string[]): void {
    if (cidrs.length === 0) {
      // The file stays as it was: pods already running hold addresses of the CIDRs recorded last.
      this.problem = `Node "${this.nodeName}" has no spec.podCIDRs yet (USE_POD_CIDR is true: they give the addresses)`;
      this.log.warning(`not ready: ${this.problem}`);
      return;
    }
    if (this.cidrs && this.cidrs.join() !== cidrs.join())
      this.log.warning(`Node "${this.nodeName}": pod CIDRs changed from ${this.cidrs.join(', ')} to ${cidrs.join(', ')}`);
    this.cidrs = cidrs;
    this.write(cidrs);
  }

  private write(cidrs: string[]): void {
    const path = join(this.varDir, POD_CIDRS_FILE);
    try {
      if (writeIfChanged(path, `${cidrs.join('\n')}\n`)) this.log.info(`recorded pod CIDRs ${cidrs.join(', ')} in ${path}`);
      this.problem = undefined;
    } catch (err) {
      const problem = `cannot write ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
      if (problem !== this.problem) this.log.error(`not ready: ${problem}`);
      this.problem = problem;
    }
  }
}
