// The node controller's clean-up: a node the datastore knows (by its block affinities, its
// blocks' affinity, and with etcd its Node resource) that Kubernetes no longer has loses its
// addresses, its blocks and affinities, its waiting requests and (etcd) its Node resource. A node
// is judged gone only when absent from a complete Node list and a fresh GET answers 404. An
// address whose pod still exists is kept (the pod garbage collector deletes a gone node's pods;
// a later pass then releases it), and the block holding it stays until then.
import { cidrOfKey, keys } from '../model/keys.ts';
import type { Block } from '../model/ipam-documents.ts';
import { checkedBlock } from '../model/checked-documents.ts';
import type { Entry, Store } from '../store/store.ts';
import type { Log } from '../runtime/log.ts';
import { affineNode, allocationsIn, readBlocks } from './read-allocations.ts';
import { releaseAllocation } from './release-allocation.ts';

export interface NodeCleanup {
  store: Store;
  /** Whether the datastore has Node resources of its own (etcd), or reads the cluster's (Kubernetes). */
  ownsNodes: boolean;
  nodesSynced(): boolean;
  nodeCached(name: string): boolean;
  nodeExists(name: string): Promise<boolean>;
  podExists(namespace: string, name: string): Promise<boolean>;
  /** Addresses already reported as kept (said once, not on every pass). */
  keptReported: Set<string>;
  log: Log;
}

/** How soon to look again at a deleted node whose pods still exist. */
const POD_WAIT_MS = 5000;

/** Resolves to how soon the next pass should come when a deleted node still has pods, else undefined. */
export async function releaseDeletedNodes(cleanup: NodeCleanup): Promise<number | undefined> {
  const { store } = cleanup;
  if (!cleanup.nodesSynced()) throw new Error('waiting for a complete list of nodes');
  const blocks = await readBlocks(store);
  const [affinityKeys, nodeKeys] = await Promise.all([
    store.listKeys(keys.allAffinities),
    cleanup.ownsNodes ? store.listKeys(keys.nodes) : Promise.resolve([]),
  ]);
  const known = new Set([
    ...affinityKeys.map((key) => key.slice(keys.allAffinities.length).split('/')[0] as string),
    ...blocks.flatMap((entry) => affineNode(entry.value.affinity) ?? []),
    ...nodeKeys.map((key) => key.slice(keys.nodes.length)),
  ]);
  let waiting = false;
  for (const node of known) {
    if (node === '' || cleanup.nodeCached(node) || (await cleanup.nodeExists(node))) continue;
    const blocksOfNode = blocks.filter((entry) => affineNode(entry.value.affinity) === node);
    if (!(await releaseNode(cleanup, node, blocksOfNode))) waiting = true;
  }
  return waiting ? POD_WAIT_MS : undefined;
}

/** Whether the node is gone from the datastore (false: some of its pods still exist). */
async function releaseNode(cleanup: NodeCleanup, node: string, blocks: Entry<Block>[]): Promise<boolean> {
  const { store, log } = cleanup;
  let kept = 0;
  for (const { value: block } of blocks) {
    for (const allocation of allocationsIn(block)) {
      const { pod } = allocation;
      if (pod && (await cleanup.podExists(pod.namespace, pod.name))) {
        kept++;
        if (cleanup.keptReported.has(allocation.address)) continue;
        cleanup.keptReported.add(allocation.address);
        log.info(
          `kept ${allocation.address} in block ${block.cidr} of deleted node ${node}: pod ${pod.namespace}/${pod.name} still exists`,
        );
        continue;
      }
      const { released, endpoint } = await releaseAllocation(store, allocation);
      if (released)
        log.info(
          `released ${allocation.address} (handle ${allocation.handle}${pod ? `, pod ${pod.namespace}/${pod.name}` : ''})${endpoint ? ` and workload endpoint ${endpoint}` : ''}: node ${node} was deleted`,
        );
    }
  }
  // The blocks, now empty, then their affinities (separate writes: on the Kubernetes datastore a
  // failed second write would need the block created again to undo the first): a crash between
  // them leaves an affinity without its block, which the next pass removes below.
  for (const { key } of blocks) {
    const entry = await store.get<unknown>(key);
    if (!entry) continue;
    const block = checkedBlock(entry);
    if (affineNode(block.value.affinity) !== node || block.value.allocations.some((a) => a !== null)) continue;
    if (!(await store.commit([{ key, remove: true, revision: block.revision }])))
      throw new Error(`block ${block.value.cidr} of deleted node ${node} changed while being released`);
    log.info(`released block ${block.value.cidr}: node ${node} was deleted`);
  }
  if (kept > 0) return false;
  // Affinities whose block is gone or no longer the node's, waiting requests, and (etcd) the Node resource.
  const leftovers = [
    ...(await store.list(keys.affinities(node, 4))),
    ...(await store.list(keys.affinities(node, 6))),
    ...(await store.list(keys.pending(node))),
    ...(cleanup.ownsNodes ? [await store.get(keys.node(node))].filter((e) => e !== undefined) : []),
  ];
  for (const entry of leftovers) {
    if (entry.key.startsWith(keys.allAffinities)) {
      const block = await store.get<unknown>(keys.block(cidrOfKey(entry.key)));
      if (block && affineNode(checkedBlock(block).value.affinity) === node) continue;
    }
    if (await store.commit([{ key: entry.key, remove: true, revision: entry.revision }]))
      log.info(`removed ${describeKey(entry.key)}: node ${node} was deleted`);
  }
  return true;
}

function describeKey(key: string): string {
  if (key.startsWith(keys.nodes)) return `Node resource ${key.slice(keys.nodes.length)}`;
  if (key.startsWith(keys.allAffinities)) return `block affinity ${key.slice(keys.allAffinities.length)}`;
  return `waiting request ${key.slice(key.lastIndexOf('/') + 1)}`;
}
