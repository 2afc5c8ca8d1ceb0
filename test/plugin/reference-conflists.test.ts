// What real installs write (test/fixtures/conflists/: the reference operator's ConfigMaps, names
// mapped): each conflist parsed as bytes, with "mtu": 0 (auto), "" etcd TLS files (unset) and
// fields netplug does not know (nodename_file_optional); then ADD and DEL through the built plugin
// and Debian's portmap for a pod of a real kube-apiserver, on the Kubernetes datastore, host-local
// with the Node's pod CIDRs, or etcd. Only what install-cni fills in on a node is substituted (the
// kubeconfig path, the API server, etcd's endpoints), plus paths kept inside the test's directory.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { findPlugin } from '../../ts/cni/exec.ts';
import { autoMtu, DEFAULT_MTU_FILE, mtuFromFile } from '../../ts/config/mtu.ts';
import { parseNetconf } from '../../ts/config/netconf.ts';
import { CNI_PATH, invoke, type Outcome, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk, NETPLUGCTL, totalAllocated } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link, uniqueSubnet4, uniqueSubnet6 } from '../helpers/kernel.ts';
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

const DIR = new URL('../fixtures/conflists/', import.meta.url).pathname;
const FIXTURES = readdirSync(DIR).filter((name) => name.endsWith('.conflist'));

interface Conflist {
  name: string;
  cniVersion: string;
  plugins: Array<Record<string, unknown> & { type: string }>;
}

/** Each plugin's netconf as libcni hands it over: the list's name and cniVersion added. */
function netconfs(list: Conflist) {
  return list.plugins.map((plugin) => ({ ...plugin, name: list.name, cniVersion: list.cniVersion }));
}

test('every conflist is accepted as written: mtu 0 is auto, "" TLS files are unset', (t) => {
  t.true(FIXTURES.length >= 6);
  for (const file of FIXTURES) {
    // install-cni fills in etcd's endpoints; everything else is parsed as written.
    const text = readFileSync(join(DIR, file), 'utf8').replace('__ETCD_ENDPOINTS__', 'http://127.0.0.1:2379');
    const list = JSON.parse(text) as Conflist;
    const [netplug] = netconfs(list);
    const { conf } = parseNetconf(Buffer.from(JSON.stringify(netplug)));
    t.is(conf.mtu, expectedMtu(list), file);
    t.is(conf.etcd_key_file, undefined, file);
    t.is(conf.etcd_ca_cert_file, undefined, file);
    t.is(conf.log_level, 'INFO', file);
  }
});

/** "mtu": 0 is auto; without the field, the node agent's file, else the kernel default (1500). */
function expectedMtu(list: Conflist): number | undefined {
  return 'mtu' in (list.plugins[0] ?? {}) ? autoMtu(DEFAULT_MTU_FILE) : mtuFromFile(DEFAULT_MTU_FILE);
}

let kube: Kube;
let pluginKubeconfig: string;
const node = hostname().toLowerCase();
const podCidrs = [uniqueSubnet4(), uniqueSubnet6()];
/** netplug-ipam's pool on the Kubernetes datastore. */
const poolCidr = uniqueSubnet4();
const shared = sharedTeardowns(test);

test.before(async () => {
  removeIpamLockFileAfter(shared);
  kube = await startKube(shared);
  await installCrds(kube);
  pluginKubeconfig = (await kube.identityWith('netplug-cni-fixtures', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  // Nodes are named after the host when the netconf names none, as these do.
  await kube.core.createNode({ body: { metadata: { name: node }, spec: { podCIDR: podCidrs[0], podCIDRs: podCidrs } } });
  const created = spawnCtl('pool', 'create', 'fixtures', '--cidr', poolCidr);
  if (created.status !== 0) throw new Error(`netplugctl pool create: ${created.stderr}`);
});

/** install-cni's substitutions on a node, and the paths a test keeps in its own directory. */
function installed(t: ExecutionContext, file: string, etcdEndpoints?: string): Conflist {
  const text = readFileSync(join(DIR, file), 'utf8')
    .replaceAll('__KUBECONFIG_FILEPATH__', pluginKubeconfig)
    .replaceAll('/etc/cni/net.d/netplug-kubeconfig', pluginKubeconfig)
    .replaceAll('__ETCD_ENDPOINTS__', etcdEndpoints ?? '');
  const list = JSON.parse(text) as Conflist;
  const netplug = list.plugins[0] as Record<string, any>;
  if (netplug['kubernetes']?.k8s_api_root) netplug['kubernetes'].k8s_api_root = kube.server.url;
  netplug['log_file_path'] = join(tempDir(t, 'fxlog'), 'cni.log');
  if (netplug['ipam'].type === 'host-local') netplug['ipam'].dataDir = tempDir(t, 'fxhl');
  return list;
}

/** ADD through the list, or DEL through it in reverse with the cached result, as libcni does. */
function runList(list: Conflist, command: 'ADD' | 'DEL', call: { containerId: string; netns: string; args: string }, cached?: unknown) {
  const plugins = netconfs(list);
  let previous = cached;
  let last: Outcome | undefined;
  for (const netconf of command === 'DEL' ? plugins.reverse() : plugins) {
    const { capabilities: _, ...plugin } = netconf as Record<string, unknown>;
    last = invoke({
      ...call,
      command,
      executable: findPlugin(netconf.type, CNI_PATH.split(':')),
      netconf: { ...plugin, ...(previous !== undefined ? { prevResult: previous } : {}) },
    });
    if (last.status !== 0) return last;
    if (command === 'ADD') previous = last.json;
  }
  return { ...(last as Outcome), json: previous };
}

async function addAndDel(t: ExecutionContext, file: string, etcdEndpoints?: string) {
  const list = installed(t, file, etcdEndpoints);
  const pod = await createPod(kube);
  const netns = createNetns(t, 'fx');
  const id = containerId();
  const call = { containerId: id, netns: netns.path, args: podArgs(pod, id) };
  t.teardown(() => runList(list, 'DEL', call));
  const add = runList(list, 'ADD', call);
  t.is(add.status, 0, `${file}: ${add.stdout}${add.stderr}`);
  const result = add.json;
  t.is(link('eth0', netns)?.mtu, expectedMtu(list) ?? 1500, 'mtu 0: the MTU file, else the default-route interface');
  const ips = (result.ips as Array<{ address: string }>).map((ip) => ip.address.split('/')[0] as string);
  for (const ip of ips)
    t.true(
      addresses('eth0', netns).some((a) => a.startsWith(`${ip}/`)),
      ip,
    );
  t.true(readFileSync(String(list.plugins[0]?.['log_file_path']), 'utf8').includes('workload networked'));
  const del = runList(list, 'DEL', call, result);
  t.is(del.status, 0, del.stdout);
  t.is(link('eth0', netns), undefined);
  t.is(link(result.interfaces[0].name), undefined, 'the host end is gone');
  return ips;
}

for (const file of FIXTURES.filter((name) => name.includes('host-local'))) {
  test(`${file}: ADD and DEL with the Node's pod CIDRs`, async (t) => {
    const ips = await addAndDel(t, file);
    t.is(ips.length, file.includes('dual-stack') ? 2 : 1);
    t.true(ips[0]?.startsWith(podCidrs[0]?.split('.').slice(0, 3).join('.') ?? '-'), ips[0]);
  });
}

for (const file of FIXTURES.filter((name) => name.includes('operator') && !name.includes('host-local'))) {
  test(`${file}: ADD and DEL on the Kubernetes datastore`, async (t) => {
    const [ip] = await addAndDel(t, file);
    t.true(ip?.startsWith(poolCidr.split('.').slice(0, 3).join('.')), ip);
  });
}

test('manifest-etcd-without-tls.conflist: ADD and DEL on etcd', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', uniqueSubnet4());
  await addAndDel(t, 'manifest-etcd-without-tls.conflist', etcd.endpoints);
  t.is(totalAllocated(t, etcd), 0);
});

/** netplugctl on the Kubernetes datastore, as the cluster administrator. */
function spawnCtl(...args: string[]) {
  const options = { encoding: 'utf8' as const, env: { PATH: '/usr/bin:/bin' }, timeout: 60_000 };
  return spawnSync(NETPLUGCTL, ['--kubeconfig', kube.server.admin.kubeconfig, ...args], options);
}
