// DEL without datastore credentials on the host, on etcd with mutual TLS: the netconf names the
// client certificate and key the host keeps; with them removed, the one-shot's DEL fails naming
// the missing file, while netplug-node's DEL releases the address with the agent's own
// certificate (ETCD_CERT_FILE), since the netconf's endpoints are the agent's.
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { openStore } from '../../ts/store/open.ts';
import { callAgent } from '../helpers/agent-client.ts';
import { ONE_SHOT, spawnAgent } from '../helpers/agent-server.ts';
import { invoke, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { containerId, createNetns, link } from '../helpers/kernel.ts';
import { startKube } from '../helpers/kube.ts';
import { NODE_AGENT_RULES } from './agent.ts';

test('etcd with TLS: DEL through the agent needs none of the netconf’s certificate files; the one-shot’s names the missing one', async (t) => {
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t, { tls: true })]);
  const certs = etcd.certs;
  if (!certs) throw new Error('etcd has no certificates');
  const node = 'node-tls';
  const agent = await spawnAgent(t, {
    NODENAME: node,
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    ETCD_CA_CERT_FILE: certs.caBundle,
    ETCD_CERT_FILE: certs.clientCert,
    ETCD_KEY_FILE: certs.clientKey,
    KUBECONFIG: (await kube.identityWith('netplug-node-tls', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: '10.230.0.0/16',
    NETPLUG_NETWORKING_BACKEND: 'none',
  });
  // The host's copies, as install-cni writes them beside the netconf.
  const hostDir = tempDir(t, 'etcd-tls');
  const hostCopy = (from: string, name: string) => {
    const path = join(hostDir, name);
    copyFileSync(from, path);
    return path;
  };
  const netconf = {
    cniVersion: '1.1.0',
    name: 'tls',
    type: 'netplug',
    nodename: node,
    etcd_endpoints: etcd.endpoints,
    etcd_ca_cert_file: hostCopy(certs.caBundle, 'etcd-ca'),
    etcd_cert_file: hostCopy(certs.clientCert, 'etcd-cert'),
    etcd_key_file: hostCopy(certs.clientKey, 'etcd-key'),
    ipam: { type: 'netplug-ipam' },
  };
  const netns = createNetns(t, 'tls');
  const call = { containerId: containerId(), netns: netns.path, netconf };
  const add = await callAgent(agent.socket, { ...call, command: 'ADD' });
  t.is(add.exitCode, 0, add.stdout);
  rmSync(hostDir, { recursive: true });

  const oneShot = invoke({ ...call, command: 'DEL', executable: ONE_SHOT });
  t.is(oneShot.status, 1);
  t.regex(oneShot.json?.msg ?? '', /etcd_(ca_)?(cert|key)_file/);
  t.log(`the one-shot's DEL: ${oneShot.json?.msg}`);

  const del = await callAgent(agent.socket, { ...call, command: 'DEL' });
  t.is(del.exitCode, 0, del.stdout);
  t.is(link('eth0', netns), undefined);
  const store = await openStore({
    etcd_endpoints: etcd.endpoints,
    etcd_ca_cert_file: certs.caBundle,
    etcd_cert_file: certs.clientCert,
    etcd_key_file: certs.clientKey,
  });
  t.teardown(() => store.close());
  t.deepEqual(await store.listKeys('/netplug/ipam/v2/handle/tls.'), [], 'released with the agent’s own certificate');
});
