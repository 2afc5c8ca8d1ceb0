// netplug's custom resource definitions (deploy/crds/) on a real kube-apiserver: their schemas make
// the API server refuse documents netplug could not use, naming the field; netplugctl's pool
// update and delete on the Kubernetes datastore, by compare-and-swap on resourceVersion; and the
// broken documents a schema cannot catch (a selector's grammar, a block's array against its CIDR,
// a handle's keys) reaching the plugin as error 7 naming the resource, never as error 999.
import { spawnSync } from 'node:child_process';

import test, { type ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { newBlock } from '../../ts/ipam/block.ts';
import { handleId, hostAffinity, keys } from '../../ts/model/keys.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import { hasStackTrace, invoke } from '../helpers/cni.ts';
import { addressesOf, NETPLUGCTL } from '../helpers/ipam.ts';
import { containerId, createNetns, link } from '../helpers/kernel.ts';
import {
  createPod,
  DATASTORE_RULES,
  installCrds,
  PLUGIN_RULES,
  podArgs,
  startKube,
  type Kube,
  removeIpamLockFileAfter,
} from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { deleteSeesConcurrentAllocation, updatesDoNotLoseEachOther } from '../ctl/races.ts';

const GROUP = 'crd.projectnet.org';
const NODE = 'crd-0';
let kube: Kube;
let custom: k8s.CustomObjectsApi;
let stores: [KubeStore, KubeStore];
let pluginKubeconfig: string;
const shared = sharedTeardowns(test);

test.before(async () => {
  removeIpamLockFileAfter(shared);
  kube = await startKube(shared);
  await installCrds(kube);
  custom = kube.custom;
  const open = async () => new KubeStore(await openKubeClient({ kubeconfig: kube.server.admin.kubeconfig }));
  stores = [await open(), await open()];
  shared.teardown(() => {
    for (const store of stores) store.close();
  });
  pluginKubeconfig = (await kube.identityWith('netplug-cni-crd', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  await kube.core.createNode({ body: { metadata: { name: NODE, labels: { crd: 'yes' } } } });
});

/** netplugctl on the Kubernetes datastore, as the cluster administrator. */
function kctl(...args: string[]) {
  const run = spawnSync(NETPLUGCTL, ['--kubeconfig', kube.server.admin.kubeconfig, ...args], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 60_000,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

function kctlOk(t: ExecutionContext, ...args: string[]): string {
  const run = kctl(...args);
  t.is(run.status, 0, `netplugctl ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

const KINDS: Record<string, string> = {
  ippools: 'IPPool',
  ipamblocks: 'IPAMBlock',
  ipamhandles: 'IPAMHandle',
  blockaffinities: 'BlockAffinity',
  ipampendingrequests: 'IPAMPendingRequest',
  workloadendpoints: 'WorkloadEndpoint',
};

/** Creates the object as kubectl create would: the fields the API server names in its refusal, or [] if it accepted (and it is removed again). */
async function refusedFields(plural: string, spec: unknown): Promise<{ fields: string[]; message: string }> {
  const name = `schema-${Math.random().toString(36).slice(2, 10)}`;
  try {
    await custom.createClusterCustomObject({
      group: GROUP,
      version: 'v1',
      plural,
      body: { apiVersion: `${GROUP}/v1`, kind: KINDS[plural], metadata: { name }, spec },
    });
  } catch (err) {
    const body = (err as { body?: unknown }).body;
    const status = (typeof body === 'string' ? JSON.parse(body) : body) as { message: string; details?: { causes?: { field: string }[] } };
    return { fields: (status.details?.causes ?? []).map((cause) => cause.field), message: status.message };
  }
  await custom.deleteClusterCustomObject({ group: GROUP, version: 'v1', plural, name });
  return { fields: [], message: 'accepted' };
}

const pool = (spec: Record<string, unknown>) => ({
  kind: 'IPPool',
  apiVersion: 'projectnet.org/v3',
  metadata: { name: 'p', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: { cidr: '10.190.0.0/16', blockSize: 26, ...spec },
});

test('the API server refuses pools netplug could not use, naming the field', async (t) => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ blockSize: 'x' }, 'spec.spec.blockSize'],
    [{ blockSize: 26.5 }, 'spec.spec.blockSize'],
    [{ blockSize: 8 }, 'spec.spec.blockSize'],
    [{ blockSize: 100 }, 'spec.spec.blockSize'],
    [{ cidr: 'fd90::/48', blockSize: 64 }, 'spec.spec.blockSize'],
    [{ cidr: '10.190.0.0/24', blockSize: 20 }, 'spec.spec.blockSize'],
    [{ cidr: 'ten/8' }, 'spec.spec.cidr'],
    [{ cidr: '10.190.0.0/33' }, 'spec.spec.cidr'],
    [{ cidr: '10.190.0.256/24' }, 'spec.spec.cidr'],
    [{ cidr: '1:2:3/64', blockSize: 120 }, 'spec.spec.cidr'],
    [{ cidr: undefined }, 'spec.spec.cidr'],
    [{ ipipMode: 'Sometimes' }, 'spec.spec.ipipMode'],
    [{ vxlanMode: 'always' }, 'spec.spec.vxlanMode'],
    [{ ipipMode: 'Always', vxlanMode: 'CrossSubnet' }, 'spec.spec.ipipMode'],
    [{ natOutgoing: 1 }, 'spec.spec.natOutgoing'],
    [{ disabled: 'yes' }, 'spec.spec.disabled'],
    [{ nodeSelector: 7 }, 'spec.spec.nodeSelector'],
  ];
  for (const [spec, field] of cases) {
    const { fields, message } = await refusedFields('ippools', pool(spec));
    t.true(fields.includes(field), `${JSON.stringify(spec)}: ${message}`);
  }
  t.true((await refusedFields('ippools', { ...pool({}), kind: 'Pool' })).fields.includes('spec.kind'));
  t.true((await refusedFields('ippools', { ...pool({}), metadata: {} })).fields.includes('spec.metadata.name'));
  const full = { nodeSelector: 'all()', ipipMode: 'CrossSubnet', vxlanMode: 'Never', natOutgoing: true, disabled: false };
  t.deepEqual(await refusedFields('ippools', pool(full)), { fields: [], message: 'accepted' });
  t.deepEqual(await refusedFields('ippools', pool({ cidr: 'fd90::/48', blockSize: 122 })), { fields: [], message: 'accepted' });
});

test('the API server refuses blocks, handles, affinities, pending requests and endpoints of the wrong shape', async (t) => {
  const block = newBlock('10.191.0.0/26', hostAffinity('n'), new Date());
  const endpoint = {
    kind: 'WorkloadEndpoint',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'n-k8s-p-eth0', namespace: 'default', labels: { app: 'x' }, creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: {
      orchestrator: 'k8s',
      workload: '',
      node: 'n',
      containerID: 'c',
      pod: 'p',
      endpoint: 'eth0',
      interfaceName: 'np0123456789abc',
      mac: '0a:58:0a:00:00:05',
      ipNetworks: ['10.0.0.5/32'],
      profiles: ['kns.default'],
      ports: [{ name: 'http', protocol: 'TCP', port: 80 }],
    },
  };
  const cases: Array<[string, unknown, string]> = [
    ['ipamblocks', { ...block, cidr: 'x' }, 'spec.cidr'],
    ['ipamblocks', { ...block, allocations: ['x', ...block.allocations.slice(1)] }, 'spec.allocations[0]'],
    ['ipamblocks', { ...block, unallocated: [-1] }, 'spec.unallocated[0]'],
    ['ipamblocks', { ...block, attributes: [{ handle_id: 1, secondary: {} }] }, 'spec.attributes[0].handle_id'],
    ['ipamblocks', { ...block, attributes: [{ handle_id: 'h', secondary: { node: 1 } }] }, 'spec.attributes[0].secondary.node'],
    ['ipamblocks', { ...block, affinity: 7 }, 'spec.affinity'],
    ['ipamhandles', { handleID: 'h', block: { '10.191.0.0/26': 'many' } }, 'spec.block.10.191.0.0/26'],
    ['ipamhandles', { handleID: 'h' }, 'spec.block'],
    ['blockaffinities', { state: 'maybe', deleted: false }, 'spec.state'],
    [
      'ipampendingrequests',
      { handle: 'h', attributes: {}, requests: [{ family: 5, pools: [] }], created: 'now' },
      'spec.requests[0].family',
    ],
    ['workloadendpoints', { ...endpoint, spec: { ...endpoint.spec, ipNetworks: ['nope'] } }, 'spec.spec.ipNetworks[0]'],
    ['workloadendpoints', { ...endpoint, spec: { ...endpoint.spec, node: undefined } }, 'spec.spec.node'],
    [
      'workloadendpoints',
      { ...endpoint, spec: { ...endpoint.spec, ports: [{ name: 'x', protocol: 'TCP', port: 70000 }] } },
      'spec.spec.ports[0].port',
    ],
    ['workloadendpoints', { ...endpoint, metadata: { ...endpoint.metadata, labels: { app: 1 } } }, 'spec.metadata.labels.app'],
  ];
  for (const [plural, spec, field] of cases) {
    const { fields, message } = await refusedFields(plural, spec);
    t.true(
      fields.some((f) => f === field || f.replace(/\[/g, '.').replace(/\]/g, '') === field.replace(/\[/g, '.').replace(/\]/g, '')),
      `${plural} ${field}: ${message} (${fields.join(', ')})`,
    );
  }
  for (const [plural, spec] of [
    ['ipamblocks', block],
    ['ipamhandles', { handleID: 'h', block: { '10.191.0.0/26': 1 }, deleted: false }],
    ['blockaffinities', { state: 'confirmed', deleted: false }],
    [
      'ipampendingrequests',
      { handle: 'h', attributes: { node: 'n' }, requests: [{ family: 4, pools: ['p'] }], created: '2026-01-01T00:00:00Z' },
    ],
    ['workloadendpoints', endpoint],
  ] as const)
    t.deepEqual(await refusedFields(plural, spec), { fields: [], message: 'accepted' }, plural);
});

function kubeNetconf(pools: string[]) {
  return {
    cniVersion: '1.1.0',
    name: 'crd',
    type: 'netplug',
    nodename: NODE,
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig: pluginKubeconfig },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam', ipv4_pools: pools },
  };
}

async function podCall(t: ExecutionContext, pools: string[], id = containerId()) {
  const pod = await createPod(kube, { namespace: `crd-${process.pid}` });
  const netns = createNetns(t, 'crd');
  return { call: { containerId: id, netns: netns.path, netconf: kubeNetconf(pools), args: podArgs(pod, id) }, netns };
}

test.serial('netplugctl pool update and delete on the Kubernetes datastore: a disabled pool gives no address; --force', async (t) => {
  kctlOk(t, 'pool', 'create', 'kp', '--cidr', '10.180.0.0/16', '--block-size', '28', '--node-selector', 'crd == "yes"');
  const { call: first } = await podCall(t, ['kp']);
  const add = invoke({ ...first, command: 'ADD' });
  t.is(add.status, 0, add.stdout);
  t.regex(addressesOf(add.json)[0] ?? '', /^10\.180\./);

  t.regex(kctlOk(t, 'pool', 'update', 'kp', '--disable'), /^pool "kp" updated: disabled/);
  const stored = await custom.getClusterCustomObject({ group: GROUP, version: 'v1', plural: 'ippools', name: 'kp' });
  t.like((stored as { spec: unknown }).spec, { spec: { disabled: true, cidr: '10.180.0.0/16' } });
  const refused = invoke({ ...(await podCall(t, ['kp'])).call, command: 'ADD' });
  t.is(refused.json?.code, 7, refused.stdout);
  t.is(refused.json.msg, 'netconf field "ipam.ipv4_pools": pool "kp" (10.180.0.0/16) is disabled');

  const busy = kctl('pool', 'delete', 'kp');
  t.is(busy.status, 1);
  t.regex(busy.stderr, /^netplugctl: pool "kp" still has 1 allocated address; release them first, or add --force/);
  t.regex(
    kctlOk(t, 'pool', 'update', 'kp', '--enable', '--nat-outgoing', 'true', '--vxlan-mode', 'CrossSubnet'),
    /updated: enabled, natOutgoing true, vxlanMode CrossSubnet/,
  );
  t.regex(
    kctlOk(t, 'pool', 'delete', 'kp', '--force'),
    /^pool "kp" deleted; 1 block still holds 1 address, released as their pods are deleted\n$/,
  );
  t.is(invoke({ ...first, command: 'DEL' }).status, 0);
  const left = (await custom.listClusterCustomObject({ group: GROUP, version: 'v1', plural: 'ipamblocks' })) as {
    items: { spec: { cidr: string } }[];
  };
  t.false(
    left.items.some((b) => b.spec.cidr.startsWith('10.180.')),
    'the block went with its last address',
  );
  const affinities = (await custom.listClusterCustomObject({ group: GROUP, version: 'v1', plural: 'blockaffinities' })) as {
    items: { metadata: { name: string } }[];
  };
  t.false(affinities.items.some((a) => a.metadata.name.includes('10.180.')));
});

test.serial('Kubernetes datastore: concurrent updates of one pool both land; a delete racing an allocation is refused', async (t) => {
  await updatesDoNotLoseEachOther(t, ...stores, '10.182.0.0/16');
  await deleteSeesConcurrentAllocation(t, ...stores, '10.183.0.0/16');
  const [store] = stores;
  for (const key of [keys.block('10.183.0.0/28'), keys.handle('net.raced'), keys.pool('busy')]) {
    const entry = await store.get(key);
    if (entry) t.true(await store.commit([{ key, remove: true, revision: entry.revision }]));
  }
});

test.serial('documents a schema cannot refuse reach the plugin as error 7 naming them, and netplugctl names them too', async (t) => {
  const [store] = stores;
  const remove = async (key: string) => {
    const entry = await store.get(key);
    if (entry) await store.commit([{ key, remove: true, revision: entry.revision }]);
  };
  const refusedAdd = async (pools: string[], message: RegExp, id?: string) => {
    const { call, netns } = await podCall(t, pools, id);
    const add = invoke({ ...call, command: 'ADD' });
    t.is(add.json?.code, 7, add.stdout);
    t.regex(add.json?.msg ?? '', message);
    t.false(hasStackTrace(add.stdout + add.stderr));
    t.is(link('eth0', netns), undefined);
  };
  kctlOk(t, 'pool', 'create', 'kq', '--cidr', '10.181.0.0/16', '--block-size', '28');

  // A node selector is only a string to the schema.
  t.true(
    await store.commit([
      { key: keys.pool('kbad'), create: { ...pool({ cidr: '10.184.0.0/16', nodeSelector: 'crd ===' }), metadata: { name: 'kbad' } } },
    ]),
  );
  const selector =
    /^the datastore's IPPool "kbad" \(key .*\/ippools\/kbad\) is broken: field "spec\.nodeSelector" is not a selector: selector "crd ==="/;
  await refusedAdd(['kq'], selector);
  const list = kctl('pool', 'list');
  t.is(list.status, 1);
  t.regex(list.stderr, new RegExp(`^netplugctl: ${selector.source.slice(1)}`));
  t.regex(kctlOk(t, 'pool', 'delete', 'kbad', '--force'), /^pool "kbad" deleted\n$/);

  // A block whose allocations do not match its CIDR, on the node's path.
  const cidr = '10.181.0.0/28';
  const short = { ...newBlock(cidr, hostAffinity(NODE), new Date()), allocations: [null, null, null] };
  t.true(
    await store.commit([
      { key: keys.affinity(NODE, cidr), create: { state: 'confirmed', deleted: false } },
      { key: keys.block(cidr), create: short },
    ]),
  );
  const block = /the datastore's IPAMBlock "10\.181\.0\.0-28" \(key .*\) is broken: field "allocations" must be a list of 16 entries/;
  await refusedAdd(['kq'], block);
  const show = kctl('ipam', 'show');
  t.is(show.status, 1);
  t.regex(show.stderr, block);
  await remove(keys.block(cidr));
  await remove(keys.affinity(NODE, cidr));

  // A handle whose block map names no block.
  const id = containerId();
  t.true(
    await store.commit([
      { key: keys.handle(handleId('crd', id)), create: { handleID: handleId('crd', id), block: { x: 1 }, deleted: false } },
    ]),
  );
  await refusedAdd(
    ['kq'],
    /the datastore's IPAMHandle "crd\.[0-9a-f]+" \(key .*\) is broken: field "block" must have block CIDRs as keys, got "x"/,
    id,
  );
  await remove(keys.handle(handleId('crd', id)));

  const { call: repaired } = await podCall(t, ['kq'], id);
  t.is(invoke({ ...repaired, command: 'ADD' }).status, 0, 'repaired, ADD succeeds');
  t.is(invoke({ ...repaired, command: 'DEL' }).status, 0);
  kctlOk(t, 'pool', 'delete', 'kq');
});

/** Creates a projectnet.org/v3 object as kubectl would: the fields the API server names in its refusal, or [] if accepted (then removed). */
async function refusedPolicyFields(
  plural: string,
  document: Record<string, any>,
  fieldValidation?: 'Strict',
): Promise<{ fields: string[]; message: string }> {
  const namespaced = plural === 'networkpolicies' || plural === 'networksets';
  const body = {
    apiVersion: 'projectnet.org/v3',
    ...document,
    metadata: { name: `schema-${Math.random().toString(36).slice(2, 10)}`, ...document['metadata'] },
  };
  const name = body.metadata.name as string;
  const at = { group: 'projectnet.org', version: 'v3', plural };
  try {
    if (namespaced) await custom.createNamespacedCustomObject({ ...at, namespace: 'default', body, fieldValidation });
    else await custom.createClusterCustomObject({ ...at, body, fieldValidation });
  } catch (err) {
    const raw = (err as { body?: unknown }).body;
    const status = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { message: string; details?: { causes?: { field: string }[] } };
    return { fields: (status.details?.causes ?? []).map((cause) => cause.field), message: status.message };
  }
  if (namespaced) await custom.deleteNamespacedCustomObject({ ...at, namespace: 'default', name });
  else await custom.deleteClusterCustomObject({ ...at, name });
  return { fields: [], message: 'accepted' };
}

test('the API server refuses policy resources netplug could not use, naming the field', async (t) => {
  const policy = (spec: Record<string, unknown>) => ({ kind: 'NetworkPolicy', spec });
  const rule = (fields: Record<string, unknown>) => policy({ ingress: [{ action: 'Allow', ...fields }] });
  const cases: Array<[string, Record<string, any>, string]> = [
    ['networkpolicies', policy({ ingress: [{ action: 'Accept' }] }), 'spec.ingress[0].action'],
    ['networkpolicies', policy({ ingress: [{}] }), 'spec.ingress[0].action'],
    ['networkpolicies', rule({ protocol: 'tcp' }), 'spec.ingress[0].protocol'],
    ['networkpolicies', rule({ protocol: 256 }), 'spec.ingress[0].protocol'],
    ['networkpolicies', rule({ destination: { ports: [80] } }), 'spec.ingress[0].protocol'],
    ['networkpolicies', rule({ protocol: 'ICMP', source: { notPorts: ['http'] } }), 'spec.ingress[0].protocol'],
    ['networkpolicies', rule({ protocol: 'TCP', destination: { ports: [70000] } }), 'spec.ingress[0].destination.ports[0]'],
    ['networkpolicies', rule({ protocol: 'TCP', destination: { ports: ['Not A Name'] } }), 'spec.ingress[0].destination.ports[0]'],
    ['networkpolicies', rule({ icmp: { type: 8 } }), 'spec.ingress[0].protocol'],
    ['networkpolicies', rule({ protocol: 'ICMP', icmp: { code: 1 } }), 'spec.ingress[0].icmp.code'],
    ['networkpolicies', rule({ protocol: 'ICMP', icmp: { type: 300 } }), 'spec.ingress[0].icmp.type'],
    ['networkpolicies', rule({ ipVersion: 5 }), 'spec.ingress[0].ipVersion'],
    ['networkpolicies', rule({ protocol: 'ICMP', ipVersion: 6 }), 'spec.ingress[0].ipVersion'],
    ['networkpolicies', rule({ protocol: 58, ipVersion: 4 }), 'spec.ingress[0].ipVersion'],
    ['networkpolicies', rule({ source: { serviceAccounts: { names: ['Web_SA'] } } }), 'spec.ingress[0].source.serviceAccounts.names[0]'],
    ['networkpolicies', rule({ source: { nets: ['10.0.0.0/33'] } }), 'spec.ingress[0].source.nets[0]'],
    ['networkpolicies', rule({ source: { notNets: ['ten'] } }), 'spec.ingress[0].source.notNets[0]'],
    ['networkpolicies', policy({ types: ['ingress'] }), 'spec.types[0]'],
    ['networkpolicies', policy({ types: ['Ingress'], egress: [{ action: 'Allow' }] }), 'spec.types'],
    ['networkpolicies', policy({ order: 'first' }), 'spec.order'],
    ['networkpolicies', policy({ tier: 'Security' }), 'spec.tier'],
    [
      'globalnetworkpolicies',
      { kind: 'GlobalNetworkPolicy', spec: { egress: [{ action: 'Pass', destination: { nets: ['x'] } }] } },
      'spec.egress[0].destination.nets[0]',
    ],
    ['networksets', { kind: 'NetworkSet', spec: { nets: ['10.1.2.3/24', 'nope'] } }, 'spec.nets[1]'],
    ['globalnetworksets', { kind: 'GlobalNetworkSet', spec: { nets: [7] } }, 'spec.nets[0]'],
    ['tiers', { kind: 'Tier', spec: { order: 0 } }, 'spec.order'],
    ['tiers', { kind: 'Tier', spec: { defaultAction: 'Allow' } }, 'spec.defaultAction'],
  ];
  for (const [plural, document, field] of cases) {
    const { fields, message } = await refusedPolicyFields(plural, document);
    t.true(fields.includes(field), `${plural} ${JSON.stringify(document)}: ${field} not among ${JSON.stringify(fields)}: ${message}`);
  }
  // Rules on the whole object name the field in their message.
  const defaultTier = await refusedPolicyFields('tiers', { kind: 'Tier', metadata: { name: 'default' }, spec: { order: 5 } });
  t.regex(defaultTier.message, /tier default has order 1000000 and default action Deny/);
  const reserved = await refusedPolicyFields('networkpolicies', { ...policy({}), metadata: { name: 'knp.default.x' } });
  t.regex(reserved.message, /metadata\.name: names starting with knp\.default\. are those of Kubernetes NetworkPolicies/);
  const full = {
    kind: 'NetworkPolicy',
    spec: {
      tier: 'default',
      order: 10.5,
      selector: 'app == "web"',
      serviceAccountSelector: 'has(team)',
      types: ['Ingress', 'Egress'],
      ingress: [
        {
          action: 'Allow',
          protocol: 'TCP',
          source: {
            selector: 'app == "lb"',
            namespaceSelector: 'global()',
            nets: ['10.0.0.0/8', 'fd00::1'],
            notNets: ['10.1.0.0/16'],
            serviceAccounts: { names: ['a'], selector: 'x == "y"' },
          },
          destination: { ports: [80, '8000:8080', 'http'], notPorts: [81] },
        },
        { action: 'Log', protocol: 'ICMP', icmp: { type: 8, code: 0 }, notICMP: { type: 0 } },
        { action: 'Deny', protocol: 58, ipVersion: 6, notProtocol: 'UDP' },
      ],
      egress: [
        { action: 'Pass', notProtocol: 17, destination: { notSelector: 'a == "b"' }, metadata: { annotations: { why: 'because' } } },
      ],
    },
  };
  t.deepEqual(await refusedPolicyFields('networkpolicies', full), { fields: [], message: 'accepted' });
  for (const [plural, document] of [
    ['globalnetworkpolicies', { kind: 'GlobalNetworkPolicy', spec: { namespaceSelector: 'all()', ingress: [{ action: 'Deny' }] } }],
    ['networksets', { kind: 'NetworkSet', metadata: { labels: { set: 'a' } }, spec: { nets: ['10.0.0.0/8', '192.168.1.1'] } }],
    ['globalnetworksets', { kind: 'GlobalNetworkSet', spec: {} }],
    ['tiers', { kind: 'Tier', spec: { order: 100, defaultAction: 'Pass' } }],
    ['tiers', { kind: 'Tier', metadata: { name: 'default' }, spec: { order: 1000000 } }],
  ] as const)
    t.deepEqual(await refusedPolicyFields(plural, document), { fields: [], message: 'accepted' }, plural);
});

test('the API server refuses GlobalNetworkPolicy host endpoint flags that do not fit together, naming the field', async (t) => {
  const global = (spec: Record<string, unknown>) => ({ kind: 'GlobalNetworkPolicy', spec });
  const cases: Array<[Record<string, unknown>, string, RegExp]> = [
    [{ applyOnForward: 'yes' }, 'spec.applyOnForward', /spec\.applyOnForward: Invalid value: "string": .*must be of type boolean/],
    [{ preDNAT: 1 }, 'spec.preDNAT', /spec\.preDNAT: Invalid value: "integer": .*must be of type boolean/],
    [
      { applyOnForward: true, preDNAT: true, doNotTrack: true },
      'spec.doNotTrack',
      /spec\.doNotTrack: Invalid value: .*doNotTrack must not be true with preDNAT: true/,
    ],
    [{ preDNAT: true }, 'spec.applyOnForward', /spec\.applyOnForward: Invalid value: .*applyOnForward must be true when preDNAT is true/],
    [
      { doNotTrack: true, applyOnForward: false },
      'spec.applyOnForward',
      /spec\.applyOnForward: Invalid value: .*applyOnForward must be true when doNotTrack is true/,
    ],
    [
      { applyOnForward: true, preDNAT: true, egress: [{ action: 'Deny' }] },
      'spec.egress',
      /spec\.egress: Invalid value: .*egress must be empty when preDNAT is true/,
    ],
    [
      { applyOnForward: true, preDNAT: true, types: ['Ingress', 'Egress'] },
      'spec.types',
      /spec\.types: Invalid value: .*types must not include Egress when preDNAT is true/,
    ],
  ];
  for (const [spec, field, message] of cases) {
    const refused = await refusedPolicyFields('globalnetworkpolicies', global(spec));
    t.true(
      refused.fields.includes(field),
      `${JSON.stringify(spec)}: ${field} not among ${JSON.stringify(refused.fields)}: ${refused.message}`,
    );
    t.regex(refused.message, message, JSON.stringify(spec));
  }
  // A NetworkPolicy has no such field: kubectl (strict field validation) is refused, naming it.
  const namespaced = await refusedPolicyFields('networkpolicies', { kind: 'NetworkPolicy', spec: { doNotTrack: true } }, 'Strict');
  t.regex(namespaced.message, /unknown field "spec\.doNotTrack"/);

  // Accepted, and kept as written (not pruned): a preDNAT policy, an untracked one, one for forwarded traffic.
  for (const spec of [
    {
      applyOnForward: true,
      preDNAT: true,
      types: ['Ingress'],
      ingress: [{ action: 'Deny', protocol: 'TCP', destination: { ports: [30080] } }],
    },
    { applyOnForward: true, doNotTrack: true, preDNAT: false, ingress: [{ action: 'Allow' }], egress: [{ action: 'Allow' }] },
    { applyOnForward: true, egress: [{ action: 'Allow' }] },
  ]) {
    const name = `hep-${Math.random().toString(36).slice(2, 10)}`;
    const at = { group: 'projectnet.org', version: 'v3', plural: 'globalnetworkpolicies' };
    await custom.createClusterCustomObject({
      ...at,
      body: { apiVersion: 'projectnet.org/v3', kind: 'GlobalNetworkPolicy', metadata: { name }, spec },
      fieldValidation: 'Strict',
    });
    const stored = (await custom.getClusterCustomObject({ ...at, name })) as { spec: unknown };
    t.deepEqual(stored.spec, spec);
    await custom.deleteClusterCustomObject({ ...at, name });
  }
});
