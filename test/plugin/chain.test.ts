// netplug chained with Debian's portmap, as the spec's chained entry declares it
// (snat: true, capabilities.portMappings: true): the result carries what portmap needs, a host
// port reaches the pod, and DEL removes the rules with the pod.
import test from 'ava';

import { fetchTcp, hostAddress, natRulesMentioning, runChain, serveInNamespace, uniqueHostPort, type Conflist } from '../helpers/chain.ts';
import { hostVeth, reservations, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, link, uniqueSubnet4, uniqueSubnet6 } from '../helpers/kernel.ts';

function conflist(dataDir: string, version = '1.0.0'): Conflist {
  return {
    cniVersion: version,
    name: 'netplug-test',
    plugins: [
      { type: 'netplug', ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: uniqueSubnet4() }], [{ subnet: uniqueSubnet6() }]] } },
      { type: 'portmap', snat: true, capabilities: { portMappings: true } },
    ],
  };
}

for (const version of ['0.3.1', '0.4.0', '1.0.0']) {
  test(`CNI ${version}: a host port reaches the pod through portmap, and DEL removes it all`, async (t) => {
    const netns = createNetns(t, 'pm');
    const dataDir = tempDir(t, 'hl');
    const list = conflist(dataDir, version);
    const hostPort = uniqueHostPort();
    const runtime = {
      containerId: containerId(),
      netns: netns.path,
      capabilityArgs: { portMappings: [{ hostPort, containerPort: 8080, protocol: 'tcp' }] },
    };
    await serveInNamespace(t, netns, 8080, 'hello from the pod');

    const add = runChain(list, 'ADD', runtime);
    t.teardown(() => void runChain(list, 'DEL', runtime, add.json)); // DEL is idempotent
    t.is(add.status, 0, add.stdout);
    t.true(natRulesMentioning(runtime.containerId).length > 0, 'portmap programmed its rules');
    t.is(await fetchTcp('127.0.0.1', hostPort), 'hello from the pod', 'through 127.0.0.1 (route_localnet + portmap snat)');
    t.is(await fetchTcp(hostAddress(), hostPort), 'hello from the pod', "through the host's own address");

    if (version !== '0.3.1') {
      // CHECK of netplug's entry with the chain's final result, as the runtime hands it over.
      // (Not portmap's: Debian's portmap 1.1.1 looks for its IPv4 rules in the ip6tables chain
      // whenever ip6tables exists, and fails CHECK on every healthy pod.)
      const netplugOnly = { ...list, plugins: list.plugins.slice(0, 1) };
      const check = runChain(netplugOnly, 'CHECK', runtime, add.json);
      t.is(check.status, 0, check.stdout);
    }
    const del = runChain(list, 'DEL', runtime, add.json);
    t.is(del.status, 0, del.stdout);
    t.deepEqual(natRulesMentioning(runtime.containerId), [], 'no NAT rule left');
    t.is(link(hostVeth(runtime.containerId)), undefined);
    t.deepEqual(reservations(dataDir), []);
    t.not(await fetchTcp('127.0.0.1', hostPort), 'hello from the pod');
  });
}
