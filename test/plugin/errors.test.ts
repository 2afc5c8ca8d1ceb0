// Bad input gets the spec's error object on stdout with the right code and a message naming the
// field and its value, exit 1, no stack trace, and nothing allocated or created.
import test from 'ava';

import { hasStackTrace, hostLocalNetconf, hostVeth, type Invocation, invoke, reservations, runtimeInput, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, link, uniqueSubnet4 } from '../helpers/kernel.ts';

interface Case {
  title: string;
  code: number;
  message: RegExp;
  call: (netns: string, dataDir: string) => Omit<Invocation, 'containerId'> & { containerId?: string };
}

const netconf = (dataDir: string, extra: Record<string, unknown> = {}) =>
  hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4(), extra });

const cases: Case[] = [
  {
    title: 'unknown CNI_COMMAND',
    code: 4,
    message: /CNI_COMMAND "FROB" is not one of ADD, DEL, CHECK, VERSION, STATUS, GC/,
    call: (netns, d) => ({ command: 'FROB', netns, netconf: netconf(d) }),
  },
  {
    title: 'ADD without CNI_NETNS',
    code: 4,
    message: /ADD needs CNI_NETNS, which is not set/,
    call: (_, d) => ({ command: 'ADD', netns: '', netconf: netconf(d) }),
  },
  {
    title: 'invalid CNI_CONTAINERID',
    code: 4,
    message: /CNI_CONTAINERID "-bad id" is invalid/,
    call: (netns, d) => ({ command: 'ADD', netns, containerId: '-bad id', netconf: netconf(d) }),
  },
  {
    title: 'CNI_IFNAME longer than 15 bytes',
    code: 4,
    message: /CNI_IFNAME "eth0-much-too-long" is 18 bytes long; at most 15/,
    call: (netns, d) => ({ command: 'ADD', netns, ifname: 'eth0-much-too-long', netconf: netconf(d) }),
  },
  {
    title: 'CNI_IFNAME with a slash',
    code: 4,
    message: /CNI_IFNAME "a\/b" contains/,
    call: (netns, d) => ({ command: 'ADD', netns, ifname: 'a/b', netconf: netconf(d) }),
  },
  {
    // U+6800 is E6 A0 80 in UTF-8; the kernel's isspace() counts the byte 0xA0 as white space.
    title: 'CNI_IFNAME with a byte the kernel counts as white space',
    code: 4,
    message: /CNI_IFNAME "栀" contains '\/', ':' or a byte the kernel counts as white space/,
    call: (netns, d) => ({ command: 'ADD', netns, ifname: '栀', netconf: netconf(d) }),
  },
  {
    title: 'unknown CNI_ARGS key',
    code: 4,
    message: /CNI_ARGS: unknown keys "FOO" \(set IgnoreUnknown=1/,
    call: (netns, d) => ({ command: 'ADD', netns, args: 'FOO=bar', netconf: netconf(d) }),
  },
  {
    title: 'CNI_ARGS IP that is not an address',
    code: 4,
    message: /CNI_ARGS: IP "10\.0\.0\.999" is not an IP address/,
    call: (netns, d) => ({ command: 'ADD', netns, args: 'IgnoreUnknown=1;IP=10.0.0.999', netconf: netconf(d) }),
  },
  {
    title: 'stdin that is not JSON',
    code: 6,
    message: /not valid JSON/,
    call: (netns) => ({ command: 'ADD', netns, stdin: '{"cniVersion": ' }),
  },
  {
    title: 'unsupported cniVersion',
    code: 1,
    message: /"cniVersion" is "9\.9\.9"; this plugin supports 0\.1\.0/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: { ...netconf(d), cniVersion: '9.9.9' } }),
  },
  {
    title: 'num_queues of 0',
    code: 7,
    message: /netconf field "num_queues" must be at least 1, got 0/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: netconf(d, { num_queues: 0 }) }),
  },
  {
    title: 'mtu that is a string',
    code: 7,
    message: /netconf field "mtu" must be a number, got "1500"/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: netconf(d, { mtu: '1500' }) }),
  },
  {
    title: 'policy type other than k8s',
    code: 7,
    message: /netconf field "policy\.type" must be "k8s", the only supported policy type, got "calico"/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: netconf(d, { policy: { type: 'calico' } }) }),
  },
  {
    title: 'etcd_discovery_srv with etcd_endpoints',
    code: 7,
    message: /netconf field "etcd_discovery_srv" cannot be combined with etcd_endpoints/,
    call: (netns, d) => ({
      command: 'ADD',
      netns,
      netconf: netconf(d, { etcd_endpoints: 'http://127.0.0.1:2379', etcd_discovery_srv: 'example.org' }),
    }),
  },
  {
    title: 'log_level outside the four',
    code: 7,
    message: /netconf field "log_level" must be one of ERROR, WARNING, INFO, DEBUG, got "TRACE"/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: netconf(d, { log_level: 'TRACE' }) }),
  },
  {
    title: 'assign_ipv4 as a boolean',
    code: 7,
    message: /netconf field "ipam\.assign_ipv4" must be the string "true" or "false", not a JSON boolean, got true/,
    call: (netns) => ({
      command: 'ADD',
      netns,
      netconf: { cniVersion: '1.0.0', name: 'n', type: 'netplug', ipam: { type: 'netplug-ipam', assign_ipv4: true } },
    }),
  },
  {
    title: 'network name with a space',
    code: 7,
    message: /netconf field "name" must start with a letter or digit.*got "my net"/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: { ...netconf(d), name: 'my net' } }),
  },
  {
    title: 'no ipam section',
    code: 7,
    message: /netconf field "ipam" is required/,
    call: (netns) => ({ command: 'ADD', netns, netconf: { cniVersion: '1.0.0', name: 'n', type: 'netplug' } }),
  },
  {
    title: 'an IPAM plugin that is not installed',
    code: 7,
    message: /"ipam\.type" names plugin "host-locale", which is not in CNI_PATH/,
    call: (netns) => ({
      command: 'ADD',
      netns,
      netconf: { cniVersion: '1.0.0', name: 'n', type: 'netplug', ipam: { type: 'host-locale' } },
    }),
  },
  {
    title: 'host-local usePodCidr in rangeStart',
    code: 7,
    message: /"ipam\.ranges\[0\]\[0\]\.rangeStart" cannot be usePodCidr/,
    call: (netns, d) => ({
      command: 'ADD',
      netns,
      netconf: { ...netconf(d), ipam: { type: 'host-local', dataDir: d, ranges: [[{ subnet: '10.9.0.0/24', rangeStart: 'usePodCidr' }]] } },
    }),
  },
  {
    title: 'ipam.type netplug: netplug as its own IPAM plugin',
    code: 7,
    message: /netconf field "ipam\.type" is "netplug": netplug cannot delegate address management to itself/,
    call: (netns) => ({ command: 'ADD', netns, netconf: { cniVersion: '1.0.0', name: 'n', type: 'netplug', ipam: { type: 'netplug' } } }),
  },
  ...['a/b', '../../x'].map((nodename) => ({
    title: `nodename ${nodename}`,
    code: 7,
    message: new RegExp(`netconf field "nodename" must be a Kubernetes node name .*got ${JSON.stringify(nodename).replaceAll('.', '\\.')}`),
    call: (netns: string, d: string) => ({ command: 'ADD', netns, netconf: netconf(d, { nodename }) }),
  })),
  {
    title: 'nodename that is a lone UTF-16 surrogate',
    code: 7,
    message: /netconf field "nodename" must be a Kubernetes node name/,
    call: (netns, d) => ({ command: 'ADD', netns, stdin: JSON.stringify(netconf(d)).replace(/}$/, ',"nodename":"\\ud800"}') }),
  },
  {
    title: 'kubernetes.node_name with a slash',
    code: 7,
    message: /netconf field "kubernetes\.node_name" must be a Kubernetes node name .*got "a\/b"/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: netconf(d, { kubernetes: { node_name: 'a/b' } }) }),
  },
  {
    title: 'etcd_endpoints that list nothing',
    code: 7,
    message: /netconf field "etcd_endpoints" must list at least one endpoint URL, comma-separated, got ",,,"/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: netconf(d, { etcd_endpoints: ',,,' }) }),
  },
  {
    title: 'a value nested 100,000 arrays deep',
    code: 7,
    message: /netconf field "mtu" nests values more than 64 levels deep/,
    call: (netns, d) => ({
      command: 'ADD',
      netns,
      stdin: JSON.stringify(netconf(d)).replace(/}$/, `,"mtu":${'['.repeat(100_000)}${']'.repeat(100_000)}}`),
    }),
  },
  {
    title: 'mtu between 1 and 67',
    code: 7,
    message: /netconf field "mtu" must be 0 \(auto\) or from 68 to 65535, got 67/,
    call: (netns, d) => ({ command: 'ADD', netns, netconf: netconf(d, { mtu: 67 }) }),
  },
  {
    title: 'a namespace that does not exist',
    code: 3,
    message: /network namespace \/run\/netns\/netplug-nowhere does not exist/,
    call: (_, d) => ({ command: 'ADD', netns: '/run/netns/netplug-nowhere', netconf: netconf(d) }),
  },
  {
    title: "the plugin's own namespace",
    code: 8,
    message: /\/proc\/self\/ns\/net is the host's own network namespace/,
    call: (_, d) => ({ command: 'ADD', netns: '/proc/self/ns/net', netconf: netconf(d) }),
  },
  {
    title: 'CHECK on a 0.3.1 network',
    code: 1,
    message: /"cniVersion" is "0\.3\.1", which has no CHECK; it needs 0\.4\.0 or later/,
    call: (netns, d) => ({ command: 'CHECK', netns, netconf: { ...netconf(d), cniVersion: '0.3.1' } }),
  },
  {
    title: 'GC on a 1.0.0 network',
    code: 1,
    message: /"cniVersion" is "1\.0\.0", which has no GC; it needs 1\.1\.0 or later/,
    call: (_, d) => ({ command: 'GC', netconf: netconf(d) }),
  },
  {
    title: 'CHECK without prevResult',
    code: 7,
    message: /CHECK needs the result of ADD in netconf field "prevResult"/,
    call: (netns, d) => ({ command: 'CHECK', netns, netconf: netconf(d) }),
  },
];

for (const { title, code, message, call } of cases) {
  test(`error ${code}: ${title}`, (t) => {
    const netns = createNetns(t, 'err');
    const dataDir = tempDir(t, 'hl');
    const id = containerId();
    const outcome = invoke({ containerId: id, ...call(netns.path, dataDir) });
    t.is(outcome.status, 1, outcome.stdout);
    t.is(outcome.json?.code, code, outcome.stdout);
    t.regex(outcome.json?.msg ?? '', message);
    t.is(typeof outcome.json?.cniVersion, 'string');
    t.false(hasStackTrace(outcome.stdout + outcome.stderr), outcome.stderr);
    t.is(link(hostVeth(id)), undefined, 'no host interface made');
    t.is(link('eth0', netns), undefined, 'nothing made in the namespace');
    t.deepEqual(reservations(dataDir), [], 'nothing allocated');
  });
}

test('without CNI_COMMAND the plugin explains itself on stderr and exits 0', (t) => {
  const outcome = invoke({ command: '', env: { PATH: '/usr/bin:/bin' } });
  t.is(outcome.status, 0);
  t.is(outcome.stdout, '');
  t.regex(
    outcome.stderr,
    /netplug .*: a CNI plugin run by container runtimes[\s\S]*CNI protocol versions supported: 0\.1\.0, 0\.2\.0, 0\.3\.0, 0\.3\.1, 0\.4\.0, 1\.0\.0, 1\.1\.0/,
  );
});

test('VERSION lists every supported version', (t) => {
  const outcome = invoke({ command: 'VERSION', env: { CNI_COMMAND: 'VERSION' }, stdin: '{"cniVersion":"0.4.0"}' });
  t.is(outcome.status, 0);
  t.deepEqual(outcome.json, { cniVersion: '1.1.0', supportedVersions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });
});

test('a DEL with a 2 MiB value in its netconf writes a short error, not the value', (t) => {
  const huge = `${'x'.repeat(2 * 1024 * 1024)}/`;
  const del = invoke({ command: 'DEL', containerId: containerId(), netconf: { ...netconf(tempDir(t, 'hl')), name: huge, nodename: huge } });
  t.is(del.json?.code, 7, del.stdout.slice(0, 500));
  t.regex(del.json.msg, /x{199}\.\.\. \(2097155 characters\)/);
  t.true(del.stdout.length + del.stderr.length < 8192, `${del.stdout.length} + ${del.stderr.length} bytes written`);
});

test('a FELIX_INTERFACEPREFIX that leaves the hash fewer than 11 characters is refused (error 4)', (t) => {
  // A prefix of 4 leaves the hash its 11 digits; 5 or more would cut it, and at 15 every pod on
  // the node got the same host interface.
  for (const prefix of ['abcde', 'x'.repeat(15)]) {
    const netns = createNetns(t, 'pfx');
    const id = containerId();
    const { env, input } = runtimeInput({ command: 'ADD', containerId: id, netns: netns.path, netconf: netconf(tempDir(t, 'hl')) });
    const add = invoke({ command: 'ADD', env: { ...env, FELIX_INTERFACEPREFIX: `${prefix},tap` }, stdin: input });
    t.is(add.json?.code, 4, add.stdout);
    t.regex(add.json.msg, new RegExp(`FELIX_INTERFACEPREFIX's first entry "${prefix}" is ${prefix.length} bytes long: .*at most 4`));
    t.is(link('eth0', netns), undefined, 'nothing made');
    const del = invoke({ command: 'DEL', env: { ...env, CNI_COMMAND: 'DEL', FELIX_INTERFACEPREFIX: prefix }, stdin: input });
    t.is(del.json?.code, 4, del.stdout);
  }
});

test('two pods with a 4-character prefix get host interfaces of their own', (t) => {
  const dataDir = tempDir(t, 'hl');
  const conf = netconf(dataDir);
  const made: string[] = [];
  for (const pod of ['web-0', 'web-1']) {
    const netns = createNetns(t, 'pfx');
    const id = containerId();
    const { env, input } = runtimeInput({
      command: 'ADD',
      containerId: id,
      netns: netns.path,
      netconf: conf,
      args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=${pod}`,
    });
    const prefixed = { ...env, FELIX_INTERFACEPREFIX: 'np4x' };
    t.teardown(() => invoke({ command: 'DEL', env: { ...prefixed, CNI_COMMAND: 'DEL' }, stdin: input }));
    const add = invoke({ command: 'ADD', env: prefixed, stdin: input });
    t.is(add.status, 0, add.stdout);
    made.push(add.json.interfaces[0].name);
  }
  t.is(made[0]?.length, 15);
  t.not(made[0], made[1]);
  for (const name of made) t.truthy(link(name), `${name} exists`);
});
