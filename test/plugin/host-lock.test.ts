// The host lock's patience bounds the whole process: with another process holding the host-wide
// flock forever, a plugin process gives up waiting after its patience, goes on without the lock,
// and exits (its abandoned wait neither keeps it alive nor takes the lock later and keeps it).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { IPAM_LOCK_FILE } from '../../ts/ipam/turns.ts';
import { invoke, ROOT, tempDir } from '../helpers/cni.ts';
import { eventually } from '../helpers/eventually.ts';
import { NETPLUG_IPAM, NETPLUGCTL } from '../helpers/ipam.ts';
import { containerId } from '../helpers/kernel.ts';
import { DATASTORE_RULES, installCrds, PLUGIN_RULES, startKube, removeIpamLockFileAfter } from '../helpers/kube.ts';

/** A process (flock(1) and its child) holding the lock at `path` until the test ends. */
async function holdForever(t: ExecutionContext, path: string): Promise<void> {
  const holder = spawn('flock', ['--exclusive', path, 'sleep', 'infinity'], { detached: true, stdio: 'ignore' });
  t.teardown(() => {
    try {
      if (holder.pid) process.kill(-holder.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  // Held once a non-blocking attempt fails.
  await eventually(`the lock on ${path} to be held`, () => spawnSync('flock', ['--nonblock', path, 'true']).status !== 0, {
    intervalMs: 20,
  });
}

test('a process waiting for a lock held forever gives up after its patience and exits', async (t) => {
  const path = join(tempDir(t, 'lock'), 'host.lock');
  await holdForever(t, path);
  const script = `
    import { lockHost } from ${JSON.stringify(join(ROOT, 'ts/host/lock.ts'))};
    const lock = await lockHost(${JSON.stringify(path)}, 300);
    console.log(JSON.stringify({ gotIt: lock !== undefined }));
  `;
  // A process that never exits fails here (killed by the timeout) rather than hanging the suite.
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
    killSignal: 'SIGKILL',
  });
  t.is(run.signal, null, 'the process exited by itself');
  t.is(run.status, 0, run.stderr);
  t.deepEqual(JSON.parse(run.stdout), { gotIt: false });
});

test('Kubernetes datastore: an ADD whose host lock is held forever completes without it and exits', async (t) => {
  removeIpamLockFileAfter(t);
  const kube = await startKube(t);
  await installCrds(kube);
  const kubeconfig = (await kube.identityWith('netplug-cni-lock', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  await kube.core.createNode({ body: { metadata: { name: 'lock-a' } } });
  const pool = spawnSync(NETPLUGCTL, ['--kubeconfig', kube.server.admin.kubeconfig, 'pool', 'create', 'lock', '--cidr', '10.96.0.0/16'], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 60_000,
  });
  t.is(pool.status, 0, pool.stderr);
  const netconf = {
    cniVersion: '1.1.0',
    name: 'kddlock',
    type: 'netplug',
    nodename: 'lock-a',
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig },
    ipam: { type: 'netplug-ipam' },
  };
  const call = { executable: NETPLUG_IPAM, containerId: containerId(), netns: '/run/netns/netplug-ipam-only', netconf };
  mkdirSync(dirname(IPAM_LOCK_FILE), { recursive: true });
  await holdForever(t, IPAM_LOCK_FILE);
  // invoke() kills a process still running after 60 s: status null.
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout + add.stderr);
  t.regex(add.json?.ips?.[0]?.address ?? '', /^10\.96\./);
  const del = invoke({ ...call, command: 'DEL' });
  t.is(del.status, 0, del.stdout + del.stderr);
});
