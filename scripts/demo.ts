// npm run demo: wires two network namespaces ("pods") to the host through the native data plane,
// shows the result, pings pod to pod through the host and host to pod, checks the kernel state
// against the request, and removes everything again (also on Ctrl-C).
import { execFileSync, spawnSync } from 'node:child_process';

import { checkWorkload, setupWorkload, teardownWorkload, type WorkloadSpec } from '../ts/dataplane/index.ts';

const pods: Array<WorkloadSpec & { label: string; ns: string }> = ['a', 'b'].map((label, i) => {
  const ns = `netplug-demo-${label}-${process.pid}`;
  return {
    label,
    ns,
    netns: `/run/netns/${ns}`,
    containerIfname: 'eth0',
    hostIfname: `npdemo${label}${process.pid % 10000}`,
    addresses: [`10.99.${process.pid % 250}.${10 + i}`, `fd00:99:${(process.pid % 0xffff).toString(16)}::${10 + i}`],
    numQueues: 2,
    mtu: 1400,
  };
});

function show(title: string, args: string[]): void {
  console.log(`\n$ ${title}`);
  console.log(execFileSync(args[0] as string, args.slice(1), { encoding: 'utf8' }).trimEnd());
}

/** Operations in flight, so an interrupt can let them finish before undoing them. */
const inFlight = new Set<Promise<unknown>>();
function track<T>(operation: Promise<T>): Promise<T> {
  inFlight.add(operation);
  void operation.finally(() => inFlight.delete(operation)).catch(() => {});
  return operation;
}

/** Removes the pods' interfaces, then their namespaces. Deleting a namespace alone would let the
 * kernel destroy the veth pairs later, in the background; tearing down first removes them now. */
async function cleanUp(): Promise<void> {
  await Promise.allSettled([...inFlight]);
  await Promise.allSettled(pods.map((pod) => teardownWorkload(pod.netns, 'eth0')));
  for (const pod of pods) spawnSync('ip', ['netns', 'del', pod.ns]);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: removing what the demo made`);
    void cleanUp().finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: the demo creates network namespaces');
  for (const pod of pods) execFileSync('ip', ['netns', 'add', pod.ns]);
  console.log('netplug demo: two pods wired to the host by the Rust data plane (N-API addon)');

  const wired = await Promise.all(pods.map((pod) => track(setupWorkload(pod))));
  for (const [i, pod] of pods.entries()) {
    const made = wired[i];
    console.log(`\npod ${pod.label}: ${pod.addresses.join(', ')} on ${made?.container.name} (${made?.container.mac}), ` +
      `host end ${made?.host.name} (${made?.host.mac}), MTU ${made?.mtu}, ${pod.numQueues} queues`);
  }
  const [a, b] = pods as [(typeof pods)[number], (typeof pods)[number]];
  show(`ip -n ${a.ns} addr show eth0`, ['ip', '-n', a.ns, 'addr', 'show', 'eth0']);
  show(`ip -n ${a.ns} route; ip -n ${a.ns} -6 route`, ['sh', '-c', `ip -n ${a.ns} route; ip -n ${a.ns} -6 route`]);
  show(`ip route | grep npdemo  (host routes to the pods)`, ['sh', '-c', 'ip route | grep npdemo; ip -6 route | grep npdemo']);
  show(`pod a pings pod b (${b.addresses[0]}) through the host`, ['ip', 'netns', 'exec', a.ns, 'ping', '-c', '2', '-W', '2', b.addresses[0] as string]);
  show(`the host pings pod b over IPv6 (${b.addresses[1]})`, ['ping', '-6', '-c', '2', '-W', '2', b.addresses[1] as string]);

  for (const pod of pods) {
    const differences = await checkWorkload(pod);
    console.log(`\ncheck pod ${pod.label}: ${differences.length === 0 ? 'kernel state matches the request' : JSON.stringify(differences)}`);
  }
  for (const pod of pods) {
    console.log(`teardown pod ${pod.label}: ${await teardownWorkload(pod.netns, 'eth0')}`);
    console.log(`teardown pod ${pod.label} again: ${await teardownWorkload(pod.netns, 'eth0')} (DEL is idempotent)`);
  }
}

try {
  await main();
} finally {
  await cleanUp();
  const left = spawnSync('sh', ['-c', 'ip netns list | grep netplug-demo; ip link | grep npdemo'], { encoding: 'utf8' }).stdout;
  console.log(left.trim() ? `\nleft behind (unexpected):\n${left}` : '\nremoved both namespaces; no namespaces or links left behind');
}
