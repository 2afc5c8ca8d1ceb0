// natOutgoing: traffic from a natOutgoing pool's pods to destinations outside every pool leaves
// the node with the node's address (MASQUERADE). The rules live in a chain of netplug's own in
// the nat table, NETPLUG-NAT-OUTGOING, jumped to from the top of POSTROUTING; the chain is written
// whole with `iptables-restore --noflush` (which replaces only the chains it names) whenever the
// kernel's differs from the wanted one, and the chain and its jump are removed when no pool asks.
import { execFile } from 'node:child_process';

import type { Pool } from '../../ipam/pools.ts';
import { formatPrefix } from '../../net/cidr.ts';

export const NAT_CHAIN = 'NETPLUG-NAT-OUTGOING';
const JUMP = `-A POSTROUTING -m comment --comment "netplug: pods of natOutgoing pools" -j ${NAT_CHAIN}`;

/** The chain's rules (as `iptables -S` prints them); empty when no enabled IPv4 pool has natOutgoing. */
export function natOutgoingRules(pools: readonly Pool[]): string[] {
  const v4 = pools.filter((pool) => pool.prefix.family === 4);
  const masqueraded = v4.filter((pool) => pool.spec.natOutgoing && !pool.spec.disabled);
  if (masqueraded.length === 0) return [];
  return [
    // Between pools (pod to pod, on this node or another) the source stays: every pool, even a disabled one, still holds pods.
    ...v4.map((pool) => `-A ${NAT_CHAIN} -d ${formatPrefix(pool.prefix)} -j RETURN`),
    ...masqueraded.map((pool) => `-A ${NAT_CHAIN} -s ${formatPrefix(pool.prefix)} -j MASQUERADE`),
  ];
}

/**
 * Makes the nat table's chain and jump match `rules`; says what it did. Throws a one-line
 * message when iptables is missing or refuses.
 */
export async function syncNatOutgoing(rules: readonly string[]): Promise<'unchanged' | 'written' | 'removed'> {
  const current = (await run('iptables', ['-w', '5', '-t', 'nat', '-S'])).split('\n');
  const chainExists = current.includes(`-N ${NAT_CHAIN}`);
  const have = current.filter((line) => line.startsWith(`-A ${NAT_CHAIN} `));
  const jumps = current.filter((line) => line.startsWith('-A POSTROUTING ') && line.endsWith(`-j ${NAT_CHAIN}`));
  const first = current.find((line) => line.startsWith('-A POSTROUTING '));
  if (rules.length === 0) {
    if (!chainExists) return 'unchanged';
    const lines = ['*nat', `:${NAT_CHAIN} - [0:0]`, ...jumps.map((jump) => jump.replace(/^-A /, '-D ')), `-X ${NAT_CHAIN}`, 'COMMIT', ''];
    await run('iptables-restore', ['-w', '5', '--noflush'], lines.join('\n'));
    return 'removed';
  }
  const normalized = (line: string) => line.replace(/"/g, '');
  const jumpFirst = jumps.length === 1 && first !== undefined && normalized(first) === normalized(JUMP);
  if (chainExists && jumpFirst && have.join('\n') === rules.join('\n')) return 'unchanged';
  const lines = [
    '*nat',
    `:${NAT_CHAIN} - [0:0]`,
    ...rules,
    ...(jumpFirst ? [] : [...jumps.map((jump) => jump.replace(/^-A /, '-D ')), JUMP.replace(/^-A POSTROUTING/, '-I POSTROUTING 1')]),
    'COMMIT',
    '',
  ];
  await run('iptables-restore', ['-w', '5', '--noflush'], lines.join('\n'));
  return 'written';
}

function run(command: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(command, args, { timeout: 30_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const code = (err as NodeJS.ErrnoException).code;
      const why =
        code === 'ENOENT'
          ? `${command} is not installed`
          : `${command} ${args.join(' ')}: ${(stderr.trim() || err.message).split('\n')[0]}`;
      reject(new Error(why));
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}
