// The specification's "Migration to automatic host endpoints" as API calls, in four steps, each
// printed as it goes and each a no-op when already done (a second run reports nothing to do):
// 1. every label of an all-interfaces host endpoint (interfaceName "*", not made by the
//    controllers) onto its Node, by JSON merge patch of metadata.labels guarded by the Node's
//    resourceVersion; a label the Node has with another value is a conflict, and conflicts (or a
//    host endpoint whose node does not exist) refuse the whole migration before anything changes,
//    unless --overwrite gives the Nodes the host endpoints' values;
// 2. KubeControllersConfiguration default's autoCreate set to Enabled (created if absent);
// 3. a wait until every Node has its `<node>-auto-hep` with the created-by label;
// 4. the old host endpoints deleted, each only if it is still the object read in step 1 (same
//    UID, unchanged since: the datastore's compare-and-swap on its revision).
import * as k8s from '@kubernetes/client-node';

import { autoCreateOf, autoCreateSpec, CONFIGURATION_KEY } from '../model/kube-controllers-configuration.ts';
import { autoHostEndpointName, listHostEndpoints, newDocument, readConfiguration } from '../controllers/auto-host-endpoints-resources.ts';
import {
  CREATED_BY,
  CREATED_BY_LABEL,
  isAllInterfaces,
  isAutomatic,
  checkedHostEndpoint,
  type HostEndpoint,
} from '../model/host-endpoint.ts';
import { retryOnConflict, type Entry, type Store } from '../store/store.ts';

export interface Migration {
  store: Store;
  core: k8s.CoreV1Api;
  /** One line of progress. */
  say(line: string): void;
  signal: AbortSignal;
}

export interface MigrationOptions {
  overwrite: boolean;
  dryRun: boolean;
  timeoutMs: number;
  /** How often step 3 looks again. */
  pollMs?: number;
}

/** The migration stopped (exit 1): why, in one line; nothing after the failed step was done. */
export class MigrationRefused extends Error {
  override readonly name = 'MigrationRefused';
}

/** A label an all-interfaces host endpoint gives its node. */
interface Copied {
  value: string;
  from: string;
}

interface LabelPlan {
  /** Per node: the labels to set, each with the host endpoint it comes from. */
  patches: Map<string, Map<string, Copied>>;
  conflicts: string[];
  /** Host endpoints that cannot be migrated at all. */
  problems: string[];
}

/** Resolves to whether anything was (or, with dryRun, would be) changed. */
export async function migrateAutoHostEndpoints(migration: Migration, options: MigrationOptions): Promise<boolean> {
  const { store, core, say } = migration;
  const would = options.dryRun ? 'would ' : '';
  const old = (await listHostEndpoints(store)).filter((entry) => isAllInterfaces(entry.value));
  const nodes = (await core.listNode()).items;
  const plan = planLabels(old, nodes);
  for (const problem of plan.problems) say(`problem: ${problem}`);
  for (const conflict of plan.conflicts)
    say(`conflict${options.overwrite ? " (the node takes the host endpoint's value)" : ''}: ${conflict}`);
  if (plan.problems.length > 0)
    throw new MigrationRefused(`${plan.problems.length} host endpoint(s) cannot be migrated (listed above); nothing was changed`);
  if (plan.conflicts.length > 0 && !options.overwrite)
    throw new MigrationRefused(
      `${plan.conflicts.length} label conflict(s) between host endpoints and their nodes (listed above); nothing was changed: make them agree, or add --overwrite to give the nodes the host endpoints' values`,
    );
  let changed = false;
  if (options.dryRun) say('dry run: nothing is changed');

  say('step 1/4: copy the labels of all-interfaces host endpoints onto their nodes');
  if (plan.patches.size === 0)
    say(`  nothing to do: ${old.length === 0 ? 'no all-interfaces host endpoint' : 'their nodes have their labels'}`);
  for (const [node, labels] of plan.patches) {
    if (!options.dryRun) await labelNode(core, node, labels, options.overwrite);
    say(`  ${would}label node ${node}: ${describeLabels(labels)}`);
    changed = true;
  }

  say('step 2/4: enable automatic host endpoints (KubeControllersConfiguration default, spec.controllers.node.hostEndpoint.autoCreate)');
  const before = await readConfiguration(store);
  if (before && autoCreateOf(before.value.spec) === 'Enabled') say('  nothing to do: autoCreate is Enabled');
  else {
    if (!options.dryRun) await enableAutoCreate(store);
    say(
      `  ${would}set autoCreate: Enabled (${before ? `was ${autoCreateOf(before.value.spec)}` : 'creating KubeControllersConfiguration default'})`,
    );
    changed = true;
  }

  say(`step 3/4: wait until every node has its automatic host endpoint (<node>-auto-hep, ${CREATED_BY_LABEL}=${CREATED_BY})`);
  const missing = await missingAutoHostEndpoints(migration);
  if (missing.length === 0) say(`  nothing to wait for: all ${nodes.length} node(s) have theirs`);
  else if (options.dryRun) say(`  would wait for ${missing.join(', ')}`);
  else {
    say(`  waiting for ${missing.join(', ')}`);
    await waitForAutoHostEndpoints(migration, options);
    say('  every node has its automatic host endpoint');
    changed = true;
  }

  say('step 4/4: delete the old all-interfaces host endpoints');
  if (old.length === 0) say('  nothing to do: no all-interfaces host endpoint is left');
  const kept: string[] = [];
  for (const entry of old) {
    const { name, uid } = entry.value.metadata;
    const what = `host endpoint ${name} (node ${entry.value.spec.node}${uid ? `, uid ${uid}` : ''})`;
    if (options.dryRun) say(`  would delete ${what}`);
    else {
      const result = await deleteIfUnchanged(store, entry);
      if (result === 'deleted') say(`  deleted ${what}`);
      else if (result === 'gone') say(`  already gone: ${what}`);
      else {
        say(`  left alone: ${what}: it ${result === 'changed' ? 'changed' : 'was replaced (a new UID)'} after its labels were copied`);
        kept.push(name);
      }
    }
    changed = true;
  }
  if (kept.length > 0)
    throw new MigrationRefused(
      `host endpoint(s) ${kept.join(', ')} changed or were replaced during the migration and were left in place: run the migration again`,
    );
  if (!changed) say('nothing to do: every node has its automatic host endpoint and no all-interfaces host endpoint is left');
  return changed;
}

function planLabels(old: readonly Entry<HostEndpoint>[], nodes: readonly k8s.V1Node[]): LabelPlan {
  const byName = new Map(nodes.map((node) => [node.metadata?.name ?? '', node]));
  const plan: LabelPlan = { patches: new Map(), conflicts: [], problems: [] };
  // What each node gets, across all of its host endpoints (two may disagree).
  const given = new Map<string, Map<string, Copied>>();
  for (const { value: endpoint } of old) {
    const name = endpoint.metadata.name;
    const nodeName = endpoint.spec.node;
    const node = nodeName ? byName.get(nodeName) : undefined;
    if (!nodeName || !node) {
      plan.problems.push(
        `host endpoint ${name} ${nodeName ? `names node ${nodeName}, which does not exist` : 'names no node (spec.node)'}: delete it or set spec.node to a node, then run again`,
      );
      continue;
    }
    const has = node.metadata?.labels ?? {};
    const nodeGets = given.get(nodeName) ?? new Map<string, Copied>();
    given.set(nodeName, nodeGets);
    for (const [key, value] of Object.entries(endpoint.metadata.labels ?? {})) {
      const other = nodeGets.get(key);
      if (other && other.value !== value) {
        // Not for --overwrite to settle: neither value is the node's.
        plan.problems.push(
          `host endpoints ${other.from} and ${name} of node ${nodeName} give label ${key} the values "${other.value}" and "${value}": make them agree, then run again`,
        );
        continue;
      }
      nodeGets.set(key, { value, from: name });
      if (has[key] === value) continue;
      if (has[key] !== undefined)
        plan.conflicts.push(`node ${nodeName} has label ${key}="${has[key]}", host endpoint ${name} has ${key}="${value}"`);
      const patch = plan.patches.get(nodeName) ?? new Map<string, Copied>();
      patch.set(key, { value, from: name });
      plan.patches.set(nodeName, patch);
    }
  }
  return plan;
}

/**
 * A merge patch of the node's labels, guarded by the resourceVersion it was read at: a node
 * changed meanwhile is read again and its labels checked again (a new conflict refuses).
 */
async function labelNode(core: k8s.CoreV1Api, name: string, labels: Map<string, Copied>, overwrite: boolean): Promise<void> {
  const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
  await retryOnConflict(`label node ${name}`, async () => {
    const node = await core.readNode({ name });
    const has = node.metadata?.labels ?? {};
    for (const [key, { value, from }] of labels) {
      if (!overwrite && has[key] !== undefined && has[key] !== value)
        throw new MigrationRefused(
          `node ${name} changed during the migration: it now has label ${key}="${has[key]}", host endpoint ${from} has "${value}"; nodes labelled so far keep their labels`,
        );
    }
    const body = {
      metadata: {
        resourceVersion: node.metadata?.resourceVersion,
        labels: Object.fromEntries([...labels].map(([key, { value }]) => [key, value])),
      },
    };
    try {
      await core.patchNode({ name, body }, mergePatch);
      return true;
    } catch (err) {
      if ((err as { code?: number }).code === 409) return undefined;
      throw err;
    }
  });
}

/** The merge patch {"spec":{"controllers":{"node":{"hostEndpoint":{"autoCreate":"Enabled"}}}}}, by compare-and-swap. */
async function enableAutoCreate(store: Store): Promise<void> {
  await retryOnConflict('enable autoCreate', async () => {
    const found = await readConfiguration(store);
    if (!found) {
      const created = newDocument('KubeControllersConfiguration', 'default', undefined, autoCreateSpec('Enabled'));
      return (await store.commit([{ key: CONFIGURATION_KEY, create: created }])) || undefined;
    }
    if (autoCreateOf(found.value.spec) === 'Enabled') return true;
    const { spec } = found.value;
    const node = spec.controllers?.node;
    const enabled = {
      ...spec,
      controllers: { ...spec.controllers, node: { ...node, hostEndpoint: { ...node?.hostEndpoint, autoCreate: 'Enabled' as const } } },
    };
    return (await store.commit([{ key: found.key, update: { ...found.value, spec: enabled }, revision: found.revision }])) || undefined;
  });
}

/** The automatic host endpoints that nodes (as the API server lists them now) still lack. */
async function missingAutoHostEndpoints(migration: Migration): Promise<string[]> {
  const nodes = (await migration.core.listNode()).items.map((node) => node.metadata?.name ?? '');
  const automatic = new Set(
    (await listHostEndpoints(migration.store)).filter((entry) => isAutomatic(entry.value)).map((entry) => entry.value.metadata.name),
  );
  return nodes.map(autoHostEndpointName).filter((name) => !automatic.has(name));
}

async function waitForAutoHostEndpoints(migration: Migration, options: MigrationOptions): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const missing = await missingAutoHostEndpoints(migration);
    if (missing.length === 0) return;
    const stopped = migration.signal.aborted;
    if (stopped || Date.now() >= deadline)
      throw new MigrationRefused(
        `${stopped ? 'stopped' : `timed out after ${options.timeoutMs / 1000} s`} waiting for ${missing.join(', ')}: is netplug-kube-controllers running, with its node controller? The old host endpoints were left in place; run the migration again once the automatic ones exist`,
      );
    await sleep(Math.min(options.pollMs ?? 1000, Math.max(deadline - Date.now(), 0)), migration.signal);
  }
}

/** Deletes the host endpoint if it is still the object step 1 read: same UID, not changed since. */
async function deleteIfUnchanged(store: Store, entry: Entry<HostEndpoint>): Promise<'deleted' | 'gone' | 'changed' | 'replaced'> {
  if (await store.commit([{ key: entry.key, remove: true, revision: entry.revision }])) return 'deleted';
  const now = await store.get(entry.key);
  if (!now) return 'gone';
  return checkedHostEndpoint(now).value.metadata.uid === entry.value.metadata.uid ? 'changed' : 'replaced';
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

const describeLabels = (labels: Map<string, Copied>) =>
  [...labels].map(([key, { value, from }]) => `${key}=${value} (from host endpoint ${from})`).join(', ');
