// The same chained conflist through cnitool, containernetworking's own client: libcni builds the
// per-plugin configs, caches the result, and is the one client that sends CHECK.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { fetchTcp, natRulesMentioning, serveInNamespace, uniqueHostPort } from '../helpers/chain.ts';
import { AGENT_ENV, CNI_PATH, hostVeth, reservations, ROOT, tempDir } from '../helpers/cni.ts';
import { createNetns, ip, link, uniqueSubnet4 } from '../helpers/kernel.ts';

const cnitool = () => execFileSync('sh', ['scripts/cnitool.sh'], { cwd: ROOT, encoding: 'utf8' }).trim();

/** libcni's cnitool names the container after the namespace path. */
const cnitoolContainerId = (netns: string) => `cnitool-${createHash('sha512').update(netns).digest('hex').slice(0, 20)}`;

function writeConflist(dir: string, plugins: unknown[], version = '1.0.0'): string {
  writeFileSync(join(dir, 'netplug-test.conflist'), JSON.stringify({ cniVersion: version, name: 'netplug-test', plugins }));
  return dir;
}

test('cnitool adds, checks and deletes a pod on netplug chained with portmap', async (t) => {
  t.timeout(5 * 60_000, 'the first run builds cnitool');
  const tool = cnitool();
  const netns = createNetns(t, 'ct');
  const dataDir = tempDir(t, 'hl');
  const netplug = { type: 'netplug', ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: uniqueSubnet4() }]] } };
  const chained = writeConflist(tempDir(t, 'conf'), [netplug, { type: 'portmap', snat: true, capabilities: { portMappings: true } }]);
  // CHECK with netplug's entry alone: Debian's portmap 1.1.1 fails CHECK on healthy pods (see chain.test.ts).
  const netplugOnly = writeConflist(tempDir(t, 'conf'), [netplug]);
  const hostPort = uniqueHostPort();
  const run = (command: string, confDir: string) =>
    spawnSync(tool, [command, 'netplug-test', netns.path], {
      encoding: 'utf8',
      env: {
        PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
        NETCONFPATH: confDir,
        CNI_PATH,
        CNI_IFNAME: 'eth0',
        CAP_ARGS: JSON.stringify({ portMappings: [{ hostPort, containerPort: 8080, protocol: 'tcp' }] }),
        ...AGENT_ENV,
      },
    });
  await serveInNamespace(t, netns, 8080, 'hello through cnitool');

  const add = run('add', chained);
  t.teardown(() => void run('del', chained));
  t.is(add.status, 0, add.stdout + add.stderr);
  const result = JSON.parse(add.stdout);
  t.like(result.interfaces[1], { name: 'eth0', sandbox: netns.path });
  t.is(await fetchTcp('127.0.0.1', hostPort), 'hello through cnitool');

  t.is(run('check', netplugOnly).status, 0, 'CHECK passes');
  ip(['route', 'del', 'default'], netns);
  const check = run('check', netplugOnly);
  t.not(check.status, 0);
  t.regex(check.stderr + check.stdout, /route to 0\.0\.0\.0\/0 .* expected 0\.0\.0\.0\/0 via 169\.254\.1\.1 dev "eth0", found missing/);

  const id = cnitoolContainerId(netns.path);
  t.is(run('del', chained).status, 0);
  t.is(link(hostVeth(id)), undefined);
  t.deepEqual(natRulesMentioning(id), []);
  t.deepEqual(reservations(dataDir), []);
  t.is(run('del', chained).status, 0, 'DEL again succeeds');
});

test('cnitool STATUS on a 1.1.0 netplug network; its GC, which sends no list of valid attachments, is refused', (t) => {
  const tool = cnitool();
  const netns = createNetns(t, 'ct'); // cnitool wants one, though STATUS and GC do not use it
  const dataDir = tempDir(t, 'hl');
  const confDir = writeConflist(
    tempDir(t, 'conf'),
    [{ type: 'netplug', ipam: { type: 'host-local', dataDir, subnet: uniqueSubnet4() } }],
    '1.1.0',
  );
  const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', NETCONFPATH: confDir, CNI_PATH, ...AGENT_ENV };
  const status = spawnSync(tool, ['status', 'netplug-test', netns.path], { encoding: 'utf8', env });
  t.is(status.status, 0, status.stdout + status.stderr);
  // cnitool's GC sends no list of valid attachments (it means "release everything"): netplug refuses.
  const gc = spawnSync(tool, ['gc', 'netplug-test', netns.path], { encoding: 'utf8', env });
  t.not(gc.status, 0);
  t.regex(gc.stdout + gc.stderr, /netconf field "cni\.dev\/valid-attachments" is missing/);
});
