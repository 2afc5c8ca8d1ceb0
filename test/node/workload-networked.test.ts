// The plugin's `workloadNetworked` service, through netplug-node's real CNI server (in-process, on a
// socket in a temporary directory) with real ADDs on a real etcd: the host is told of each pod
// the plugin networks, with the interface, MAC and addresses the ADD answers with, before the
// policy wait (so a host that writes the pod's status file there spares the pod the wait); a
// failure fails the ADD, which undoes what it did. Before that, once the addresses are planned,
// the host is told them too (`workloadPlanned`), and a failed ADD withdraws what it told.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { serveCni } from '../../ts/node/cni/serve-cni.ts';
import { Logger } from '../../ts/log/logger.ts';
import { statusFileName } from '../../ts/plugin/policy-wait.ts';
import type { NetworkedWorkload } from '../../ts/plugin/services.ts';
import { callAgent, waitServing } from '../helpers/agent-client.ts';
import { tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';

const podArgs = (name: string) => `IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=${name};K8S_POD_UID=uid-${name}`;

test('the host is told of each planned and networked pod before the policy wait; its failure fails the ADD, which leaves nothing', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'networked', '--cidr', '10.232.0.0/24', '--block-size', '28');
  const dir = tempDir(t, 'cni-networked');
  const socketPath = join(dir, 'run', 'cni.sock');
  const statusDir = join(dir, 'endpoint-status');
  mkdirSync(statusDir);
  const stop = new AbortController();
  const told: NetworkedWorkload[] = [];
  const planned: NetworkedWorkload[] = [];
  let withdrawn = 0;
  let fail = false;
  const server = await serveCni({
    socketPath,
    services: {
      via: 'netplug-node',
      workloadPlanned: (workload) => {
        planned.push(workload);
        return () => withdrawn++;
      },
      workloadNetworked: async (workload) => {
        told.push(workload);
        if (fail) throw new Error('policy not programmed');
        // What the policy subsystem does once the pod's policy is in the kernel.
        writeFileSync(join(statusDir, statusFileName('k8s', workload.namespace, workload.pod, workload.containerInterface)), '{}');
      },
    },
    log: new Logger('test', () => undefined, process.pid),
    env: process.env,
    signal: stop.signal,
  });
  t.teardown(async () => {
    stop.abort();
    await server.stop();
  });
  await waitServing(socketPath);
  // A wait far longer than the test: the ADD answers because the file is there when the wait starts.
  const netconf = ipamNetconf(etcd, {
    node: 'node-networked',
    extra: { log_level: 'DEBUG', policy_setup_timeout_seconds: 3600, endpoint_status_dir: statusDir },
  });
  const netns = createNetns(t, 'networked');
  const id = containerId();
  const add = await callAgent(socketPath, { command: 'ADD', containerId: id, netns: netns.path, netconf, args: podArgs('web') });
  t.true(add.accepted);
  t.is(add.exitCode, 0, add.stdout);
  t.regex(add.stderr ?? '', /policy programmed/);
  t.is(told.length, 1);
  const [host, pod] = add.json.interfaces;
  t.deepEqual(told[0], {
    namespace: 'shop',
    pod: 'web',
    podUid: 'uid-web',
    containerInterface: 'eth0',
    hostInterface: host.name,
    mac: pod.mac,
    addresses: add.json.ips.map((ip: { address: string }) => ip.address.split('/')[0]),
  });
  t.deepEqual(planned, told, 'planned with what the ADD then networked it with');
  t.is(withdrawn, 0);

  fail = true;
  const second = containerId();
  const otherNetns = createNetns(t, 'networked');
  const failed = await callAgent(socketPath, {
    command: 'ADD',
    containerId: second,
    netns: otherNetns.path,
    netconf,
    args: podArgs('api'),
  });
  t.is(failed.exitCode, 1);
  t.like(failed.json, { code: 101, msg: 'netplug-node could not finish networking the pod: policy not programmed' });
  t.is(told.length, 2);
  t.throws(
    () => execFileSync('ip', ['-n', otherNetns.name, 'link', 'show', 'eth0'], { stdio: 'pipe' }),
    undefined,
    'the interface is gone',
  );
  t.is(totalAllocated(t, etcd), 1, "only the first pod's address is held");
  t.is(planned.length, 2);
  t.is(withdrawn, 1, 'the failed ADD withdrew what it planned');

  const del = await callAgent(socketPath, { command: 'DEL', containerId: id, netns: netns.path, netconf, args: podArgs('web') });
  t.is(del.exitCode, 0, del.stdout);
  t.is(told.length, 2, 'DELs are not told');
  t.is(totalAllocated(t, etcd), 0);
});
