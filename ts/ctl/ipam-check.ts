// netplugctl ipam check: leaks and inconsistencies between blocks, handles, affinities and workload
// endpoints. Reads only, so it never stops pods from starting (the reference's repair flow locks
// the datastore first); on the Kubernetes datastore what it finds is read again before it is
// reported, so that an ADD under way is not taken for a problem. Each problem says how to repair it.
import { ordinalsOf } from '../ipam/block.ts';
import { parsePrefix, size, type Prefix } from '../net/cidr.ts';
import { hostAffinity } from '../model/keys.ts';
import type { Store } from '../store/store.ts';
import { age } from './ipam-show.ts';
import { affineNode, heldAddresses, poolOfAddress, poolOfBlock, readIpamState, type IpamState } from './ipam-state.ts';
import { table } from './table.ts';

interface Problem {
  kind: string;
  subject: string;
  message: string;
}

export interface CheckOptions {
  /** Addresses younger than this whose workload endpoint is missing may belong to an ADD still running. */
  gracePeriodSeconds: number;
  now: Date;
  /**
   * On a datastore without transactions, what the check does before it reads again to confirm
   * what it found (default: waits CONFIRM_AFTER_MS).
   */
  confirm?: () => Promise<void>;
}

/**
 * How long a check on the Kubernetes datastore waits before it reads again. There an ADD's commit
 * is several writes (the handle and the workload endpoint, then the block) and the check's reads
 * are not at one revision, so an ADD under way can look like a handle whose address the block does
 * not hold. An ADD's writes take milliseconds.
 */
const CONFIRM_AFTER_MS = 2_000;

function findProblems(state: IpamState, { gracePeriodSeconds, now }: CheckOptions): Problem[] {
  const problems: Problem[] = [];
  const report = (kind: string, subject: string, message: string) => problems.push({ kind, subject, message });

  for (const { value: block } of state.blocks) {
    if (!poolOfBlock(state, block.cidr)) report('block-outside-pools', block.cidr, `block ${block.cidr} lies in no pool`);
    const free = new Set(block.unallocated);
    const bothOrNeither = block.allocations.findIndex((a, ordinal) => (a === null) !== free.has(ordinal));
    if (bothOrNeither >= 0 || free.size !== block.unallocated.length) {
      report('block-corrupt', block.cidr, `block ${block.cidr}: its free list and its allocations disagree (ordinal ${bothOrNeither})`);
    }
    const node = affineNode(block);
    if (node && !state.affinities.get(node)?.includes(block.cidr)) {
      report('affinity-missing', block.cidr, `block ${block.cidr} is affine to node ${node}, which has no affinity record for it`);
    }
  }
  const blocks = new Map(state.blocks.map((e) => [e.value.cidr, e.value]));
  for (const [node, cidrs] of state.affinities) {
    for (const cidr of cidrs) {
      const block = blocks.get(cidr);
      if (block && block.affinity !== hostAffinity(node)) {
        report(
          'affinity-stale',
          cidr,
          `node ${node} has an affinity record for block ${cidr}, which is affine to ${block.affinity ?? 'no node'}`,
        );
      }
    }
  }
  reportOverlaps(state, report);

  const holders = new Map([...heldAddresses(state)].map((held) => [held.address, held]));
  for (const { address, attribute } of holders.values()) {
    const handle = state.handles.get(attribute.handle_id);
    if (!handle) {
      report(
        'address-without-handle',
        address,
        `${address} is held by handle ${attribute.handle_id}, which does not exist: netplugctl ipam release --ip ${address}`,
      );
      continue;
    }
    const endpoint = attribute.secondary['endpoint'];
    const since = attribute.secondary['timestamp'];
    const old = !since || now.getTime() - Date.parse(since) >= gracePeriodSeconds * 1000;
    if (endpoint && !state.endpoints.has(endpoint) && old) {
      report(
        'leaked-address',
        address,
        `${address} (handle ${attribute.handle_id}, node ${attribute.secondary['node'] ?? '?'}${since ? `, taken ${age(since, now)} ago` : ''}) has no workload endpoint ${endpoint}: DEL the container, or netplugctl ipam release --ip ${address}`,
      );
    }
  }

  for (const [id, handle] of state.handles) {
    const counts = Object.entries(handle.block);
    if (counts.length === 0) report('empty-handle', id, `handle ${id} holds no address`);
    for (const [cidr, count] of counts) {
      const block = blocks.get(cidr);
      const actual = block ? ordinalsOf(block, id).length : 0;
      if (actual !== count)
        report('handle-mismatch', id, `handle ${id} records ${count} address(es) in block ${cidr}, which has ${actual} for it`);
    }
  }

  for (const [name, endpoint] of state.endpoints) {
    for (const network of endpoint.spec.ipNetworks) {
      const address = network.split('/')[0] as string;
      if (!poolOfAddress(state, address)) continue; // another address manager's (host-local)
      const holder = holders.get(address);
      if (!holder) report('endpoint-address-free', name, `workload endpoint ${name} has ${address}, which is not allocated`);
      else if (!holder.attribute.handle_id.endsWith(`.${endpoint.spec.containerID}`)) {
        report(
          'endpoint-address-taken',
          name,
          `workload endpoint ${name} has ${address}, which handle ${holder.attribute.handle_id} holds`,
        );
      }
    }
  }
  return problems;
}

export async function checkIpam(store: Store, json: boolean, options: CheckOptions): Promise<{ text: string; clean: boolean }> {
  let state = await readIpamState(store);
  let problems = findProblems(state, options);
  // On etcd the reads are one snapshot, and every commit one transaction: what is found is so.
  // Elsewhere only what a second read finds again is reported (see CONFIRM_AFTER_MS).
  if (problems.length > 0 && !store.transactional) {
    const started = Date.now();
    await (options.confirm ?? (() => new Promise<void>((resolve) => setTimeout(resolve, CONFIRM_AFTER_MS))))();
    const found = new Set(problems.map((p) => `${p.kind} ${p.subject}`));
    state = await readIpamState(store);
    const now = new Date(options.now.getTime() + (Date.now() - started));
    problems = findProblems(state, { ...options, now }).filter((p) => found.has(`${p.kind} ${p.subject}`));
  }
  let allocated = 0;
  for (const _ of heldAddresses(state)) allocated++;
  const counts = {
    pools: state.pools.length,
    blocks: state.blocks.length,
    allocated,
    handles: state.handles.size,
    workloadEndpoints: state.endpoints.size,
  };
  if (json) return { text: `${JSON.stringify({ ...counts, problems }, null, 2)}\n`, clean: problems.length === 0 };
  const summary = `checked ${counts.pools} pools, ${counts.blocks} blocks, ${allocated} allocated addresses, ${counts.handles} handles, ${counts.workloadEndpoints} workload endpoints\n`;
  if (problems.length === 0) return { text: `${summary}no problems found\n`, clean: true };
  return {
    text: `${summary}${problems.length} problem(s):\n${table(
      ['KIND', 'SUBJECT', 'DETAIL'],
      problems.map((p) => [p.kind, p.subject, p.message]),
    )}`,
    clean: false,
  };
}

/** Blocks that overlap would hand out one address twice. */
function reportOverlaps(state: IpamState, report: (kind: string, subject: string, message: string) => void): void {
  const sorted = state.blocks
    .map((e) => ({ cidr: e.value.cidr, prefix: parsePrefix(e.value.cidr) as Prefix }))
    .sort((a, b) => a.prefix.family - b.prefix.family || (a.prefix.base < b.prefix.base ? -1 : a.prefix.base > b.prefix.base ? 1 : 0));
  for (let i = 1; i < sorted.length; i++) {
    const [before, after] = [sorted[i - 1], sorted[i]] as [(typeof sorted)[number], (typeof sorted)[number]];
    if (before.prefix.family === after.prefix.family && after.prefix.base < before.prefix.base + size(before.prefix)) {
      report('overlapping-blocks', after.cidr, `blocks ${before.cidr} and ${after.cidr} overlap`);
    }
  }
}
