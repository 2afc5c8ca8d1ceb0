// podman with its CNI backend runs containers on a netplug network chained with portmap: they
// reach each other through the host, a host port on 127.0.0.1 reaches one, and removing them
// leaves no interface, address, NAT rule or namespace behind.
import { get } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { natRulesMentioning, uniqueHostPort } from '../helpers/chain.ts';
import { hostVeth, reservations, tempDir } from '../helpers/cni.ts';
import { link, uniqueSubnet4 } from '../helpers/kernel.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { allocatedByPool, ctlOk, etcdKeys } from '../helpers/ipam.ts';
import { IMAGE, podman } from '../helpers/podman.ts';

function httpGet(url: string): Promise<string> {
  return new Promise((resolve) => {
    const request = get(url, { timeout: 2000 }, (response) => {
      let body = '';
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () => resolve(body));
    });
    request.on('timeout', () => request.destroy(new Error('timeout')));
    request.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** Until the host port answers `expected` (the server in the container starting up); fails with the last answer. */
const hostPortAnswers = (hostPort: number, expected: string) =>
  eventually(`the host port ${hostPort} to reach the container`, async () => {
    const answer = await httpGet(`http://127.0.0.1:${hostPort}/`);
    if (answer !== expected) throw new Error(`it answered ${JSON.stringify(answer)}`);
    return answer;
  });

const WEB = (greeting: string) => `mkdir -p /www && echo ${greeting} > /www/index.html && exec httpd -f -p 8080 -h /www`;

test('podman runs containers on netplug + portmap; a host port reaches one; removal leaves nothing', async (t) => {
  t.timeout(10 * 60_000, 'the first run installs podman');
  const pm = podman(t);
  const dataDir = tempDir(t, 'hl');
  writeFileSync(
    join(pm.networkDir, 'netplug-podman.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'netplug-podman',
      plugins: [
        { type: 'netplug', ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: uniqueSubnet4() }]] } },
        { type: 'portmap', snat: true, capabilities: { portMappings: true } },
      ],
    }),
  );
  const hostPort = uniqueHostPort();
  const web = pm.run([
    'run',
    '-d',
    '--network',
    'netplug-podman',
    '-p',
    `127.0.0.1:${hostPort}:8080`,
    IMAGE,
    'sh',
    '-c',
    WEB('hello-from-web'),
  ]);
  const client = pm.run(['run', '-d', '--network', 'netplug-podman', IMAGE, 'sleep', '600']);

  t.is(await hostPortAnswers(hostPort, 'hello-from-web\n'), 'hello-from-web\n', 'the host port reaches the container');
  const webIp = pm.run(['inspect', '--format', '{{(index .NetworkSettings.Networks "netplug-podman").IPAddress}}', web]);
  t.regex(webIp, /^100\.\d+\.\d+\.\d+$/);
  t.is(pm.run(['exec', client, 'wget', '-qO-', `http://${webIp}:8080/`]), 'hello-from-web', 'container to container through the host');
  t.regex(pm.run(['exec', web, 'ip', 'route']), /default via 169\.254\.1\.1 dev eth0/);
  t.truthy(link(hostVeth(web)), 'the host end is named after the container');
  t.is(reservations(dataDir, 'netplug-podman').length, 2);

  pm.run(['rm', '--force', web, client]);
  t.is(link(hostVeth(web)), undefined);
  t.is(link(hostVeth(client)), undefined);
  t.deepEqual(reservations(dataDir, 'netplug-podman'), [], 'addresses released');
  t.deepEqual(natRulesMentioning(web), [], 'port mapping removed');
  t.not(await httpGet(`http://127.0.0.1:${hostPort}/`), 'hello-from-web\n');
});

test('podman runs containers on netplug with netplug-ipam on etcd and portmap; removal releases every address', async (t) => {
  t.timeout(10 * 60_000, 'the first run installs podman');
  const pm = podman(t);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'podman-pool', '--cidr', '10.104.0.0/16');
  writeFileSync(
    join(pm.networkDir, 'netplug-etcd.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'netplug-etcd',
      plugins: [
        { type: 'netplug', nodename: 'podman-node', ...etcd.netconf, ipam: { type: 'netplug-ipam' } },
        { type: 'portmap', snat: true, capabilities: { portMappings: true } },
      ],
    }),
  );
  const hostPort = uniqueHostPort();
  const web = pm.run([
    'run',
    '-d',
    '--network',
    'netplug-etcd',
    '-p',
    `127.0.0.1:${hostPort}:8080`,
    IMAGE,
    'sh',
    '-c',
    WEB('hello-from-etcd'),
  ]);
  const client = pm.run(['run', '-d', '--network', 'netplug-etcd', IMAGE, 'sleep', '600']);
  t.is(await hostPortAnswers(hostPort, 'hello-from-etcd\n'), 'hello-from-etcd\n', 'the host port reaches the container');
  const webIp = pm.run(['inspect', '--format', '{{(index .NetworkSettings.Networks "netplug-etcd").IPAddress}}', web]);
  t.regex(webIp, /^10\.104\.\d+\.\d+$/);
  t.is(pm.run(['exec', client, 'wget', '-qO-', `http://${webIp}:8080/`]), 'hello-from-etcd');
  t.deepEqual(allocatedByPool(t, etcd), { 'podman-pool': 2 });
  t.is(
    (await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/')).length,
    2,
    'one workload endpoint per container',
  );

  pm.run(['rm', '--force', web, client]);
  t.deepEqual(allocatedByPool(t, etcd), { 'podman-pool': 0 }, 'addresses released');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/'), []);
  t.deepEqual(natRulesMentioning(web), [], 'port mapping removed');
});
