// netplug-operator's pure logic: aliases, defaults and what is written back, validation messages,
// the conflist template, the pools and their IPPool documents, the node pod's operator variant,
// conditions from workload status, with their reasons and the generation they describe.
import test from 'ava';

import {
  combine,
  conditionsOf,
  daemonSetState,
  deploymentState,
  failingPods,
  newest,
  poolsState,
  sameConditions,
} from '../../ts/operator/compute-conditions.ts';
import { defaultsPatch } from '../../ts/operator/defaults-patch.ts';
import { desiredPools, poolObject, samePool } from '../../ts/operator/desired-pools.ts';
import { type ClusterFacts, fillDefaults } from '../../ts/operator/fill-defaults.ts';
import { type InstallationSpec, InvalidConfiguration } from '../../ts/operator/installation.ts';
import { normaliseAliases } from '../../ts/operator/normalise-aliases.ts';
import { podSubnetsOf } from '../../ts/operator/read-platform-cidrs.ts';
import { configHash, renderCniConfig } from '../../ts/operator/render-cni-config.ts';
import { renderSystem } from '../../ts/operator/render-system.ts';
import { validateInstallation } from '../../ts/operator/validate-installation.ts';

const fresh: ClusterFacts = { platformCidrs: [], poolsExist: false, poolNames: new Map() };
const filled = (spec: InstallationSpec, facts: Partial<ClusterFacts> = {}) => fillDefaults(normaliseAliases(spec), { ...fresh, ...facts });
const plugin = (spec: InstallationSpec) => JSON.parse(renderCniConfig(filled(spec))).plugins;

test('aliases: the spec forms fill the real fields; agreeing forms are fine; disagreeing forms name both fields', (t) => {
  t.deepEqual(normaliseAliases({ calicoNetwork: { cni: { type: 'Netplug', ipam: { type: 'HostLocal' } } } }), {
    calicoNetwork: {},
    cni: { type: 'Netplug', ipam: { type: 'HostLocal' } },
  });
  t.deepEqual(normaliseAliases({ cni: { ipam: { plugin: 'HostLocal' } } }).cni, { ipam: { type: 'HostLocal' } });
  t.is(normaliseAliases({ cni: { ipam: { type: 'HostLocal', plugin: 'HostLocal' } } }).cni?.ipam?.type, 'HostLocal');
  const error = t.throws(
    () => normaliseAliases({ cni: { ipam: { type: 'Netplug' } }, calicoNetwork: { cni: { ipam: { type: 'HostLocal' } } } }),
    {
      instanceOf: InvalidConfiguration,
    },
  );
  t.regex(error.message, /spec\.cni\.ipam\.type "Netplug" and spec\.calicoNetwork\.cni\.ipam\.type "HostLocal" disagree/);
  t.throws(() => normaliseAliases({ cni: { ipam: { type: 'Netplug', plugin: 'HostLocal' } } }), {
    message: /spec\.cni\.ipam\.plugin "HostLocal"/,
  });
});

test('defaults (§A.1/§A.4): one IPv4 pool 192.168.0.0/16 on a fresh cluster; kubeadm CIDRs instead when known; none when pools exist', (t) => {
  const spec = filled({});
  t.deepEqual(spec.cni, {
    type: 'Netplug',
    ipam: { type: 'Netplug' },
    binDir: '/opt/cni/bin',
    confDir: '/etc/cni/net.d',
    fastPath: 'Enabled',
  });
  t.deepEqual(spec.calicoNetwork, {
    hostPorts: 'Enabled',
    linuxPolicySetupTimeoutSeconds: 0,
    ipPools: [
      {
        cidr: '192.168.0.0/16',
        name: 'default-ipv4-ippool',
        encapsulation: 'VXLANCrossSubnet',
        natOutgoing: 'Enabled',
        nodeSelector: 'all()',
        blockSize: 26,
        disableNewAllocations: false,
      },
    ],
  });
  t.deepEqual(spec.logging, { cni: { logSeverity: 'Info', logFileMaxSize: '100Mi', logFileMaxAgeDays: 30, logFileMaxCount: 10 } });
  const kubeadm = filled({}, { platformCidrs: ['10.244.0.0/16', 'fd00:10:244::/56'] }).calicoNetwork?.ipPools;
  t.deepEqual(
    kubeadm?.map((p) => [p.name, p.cidr, p.natOutgoing, p.blockSize]),
    [
      ['default-ipv4-ippool', '10.244.0.0/16', 'Enabled', 26],
      ['default-ipv6-ippool', 'fd00:10:244::/56', 'Disabled', 122],
    ],
  );
  t.deepEqual(filled({}, { poolsExist: true }).calicoNetwork?.ipPools, []);
  t.deepEqual(filled({ cni: { ipam: { type: 'HostLocal' } } }).calicoNetwork?.ipPools, [], 'no pool invented for HostLocal');
  const names = filled(
    { calicoNetwork: { ipPools: [{ cidr: '10.0.0.0/16' }, { cidr: '10.1.0.0/16' }, { cidr: '10.2.0.0/16' }] } },
    { poolNames: new Map([['10.2.0.0/16', 'mine']]) },
  );
  t.deepEqual(
    names.calicoNetwork?.ipPools?.map((p) => p.name),
    ['10.0.0.0-16', '10.1.0.0-16', 'mine'],
  );
});

test('defaults written back: a merge patch of what defaulting added, nothing for an alias-only setting', (t) => {
  const normalised = normaliseAliases({ calicoNetwork: { cni: { ipam: { type: 'HostLocal' } }, mtu: 1400 } });
  const patch = defaultsPatch(normalised, fillDefaults(normalised, fresh));
  t.deepEqual(
    patch?.['cni'],
    { type: 'Netplug', binDir: '/opt/cni/bin', confDir: '/etc/cni/net.d', fastPath: 'Enabled' },
    'the alias value is not copied into spec.cni.ipam',
  );
  t.false('mtu' in ((patch?.['calicoNetwork'] ?? {}) as object));
  const full = fillDefaults(normalised, fresh);
  t.is(defaultsPatch(full, fillDefaults(full, fresh)), undefined, 'defaulting is idempotent');
});

test('validation names the field and the value', (t) => {
  const problems = (spec: InstallationSpec, platform: string[] = []) => validateInstallation(filled(spec), platform);
  t.deepEqual(problems({}), []);
  t.deepEqual(problems({ calicoNetwork: { ipPools: [{ cidr: '10.0.0.300/16' }] } }), [
    'spec.calicoNetwork.ipPools[0].cidr "10.0.0.300/16" is not a CIDR (such as 10.244.0.0/16 or fd00:10:244::/56)',
  ]);
  t.deepEqual(problems({ calicoNetwork: { ipPools: [{ cidr: '10.0.0.1/16' }] } }), [
    'spec.calicoNetwork.ipPools[0].cidr "10.0.0.1/16" has host bits set; did you mean 10.0.0.0/16?',
  ]);
  t.deepEqual(problems({ calicoNetwork: { mtu: 20, linuxPolicySetupTimeoutSeconds: -1 } }), [
    'spec.calicoNetwork.mtu 20 must be 0 (auto) or from 68 to 65535',
    'spec.calicoNetwork.linuxPolicySetupTimeoutSeconds -1 must be a whole number of seconds, 0 or more (0 does not wait)',
  ]);
  t.deepEqual(
    problems({
      calicoNetwork: {
        ipPools: [
          { cidr: '10.0.0.0/16', blockSize: 34 },
          { cidr: '10.0.0.0/24', encapsulation: 'VXLAN' },
        ],
      },
      cni: { ipam: { type: 'HostLocal' } },
    }),
    [
      'spec.calicoNetwork.ipPools[0].blockSize 34 must be from 20 to 32 for an IPv4 pool',
      'spec.calicoNetwork.ipPools[1].encapsulation "VXLAN" cannot be used with spec.cni.ipam.type HostLocal',
      'spec.calicoNetwork.ipPools[1].cidr "10.0.0.0/24" overlaps spec.calicoNetwork.ipPools[0].cidr 10.0.0.0/16',
    ],
  );
  t.deepEqual(problems({ calicoNetwork: { ipPools: [{ cidr: 'fd00::/48', encapsulation: 'IPIP', nodeSelector: 'a ==' }] } }), [
    'spec.calicoNetwork.ipPools[0].nodeSelector "a ==" is not a selector: ' +
      problems({ calicoNetwork: { ipPools: [{ cidr: 'fd00::/48', nodeSelector: 'a ==' }] } })[0]?.split('is not a selector: ')[1],
    'spec.calicoNetwork.ipPools[0].encapsulation "IPIP" is for IPv4 pools only',
  ]);
  t.deepEqual(problems({ calicoNetwork: { ipPools: [{ cidr: '10.0.0.0/16' }] } }, ['10.244.0.0/16']), [
    'spec.calicoNetwork.ipPools[0].cidr "10.0.0.0/16" must lie within the cluster\'s pod CIDR (10.244.0.0/16)',
  ]);
  t.deepEqual(problems({ cni: { fastPath: 'On' as never } }), ['spec.cni.fastPath "On" must be Enabled or Disabled']);
  t.deepEqual(problems({ policy: { enforcement: 'Off' as never, endpointStatusPathPrefix: 'run/netplug' } }), [
    'spec.policy.enforcement "Off" must be Enabled or Disabled',
    'spec.policy.endpointStatusPathPrefix "run/netplug" must be an absolute host path without ".."',
  ]);
  t.deepEqual(problems({ cni: { binDir: 'opt/cni' }, logging: { cni: { logFileMaxSize: '10Ki', logFileMaxCount: 0 } } }), [
    'spec.cni.binDir "opt/cni" must be an absolute host path without ".."',
    'spec.logging.cni.logFileMaxSize "10Ki" must be a quantity of at least 1Mi, such as 100Mi',
    'spec.logging.cni.logFileMaxCount 0 must be a whole number greater than 0',
  ]);
});

test('the conflist template (§A.2): netplug-ipam by pool families, host-local usePodCidr, timeout, portmap, logging, forwarding', (t) => {
  const [netplug, portmap] = plugin({});
  t.deepEqual(netplug, {
    type: 'netplug',
    datastore_type: 'kubernetes',
    nodename: '__KUBERNETES_NODE_NAME__',
    mtu: 0,
    log_level: 'Info',
    log_file_path: '/var/log/netplug/cni/cni.log',
    log_file_max_size: 100,
    log_file_max_age: 30,
    log_file_max_count: 10,
    ipam: { type: 'netplug-ipam', assign_ipv4: 'true', assign_ipv6: 'false' },
    container_settings: { allow_ip_forwarding: false },
    policy: { type: 'k8s' },
    policy_setup_timeout_seconds: 0,
    endpoint_status_dir: '/var/run/netplug/endpoint-status',
    kubernetes: { kubeconfig: '__KUBECONFIG_FILEPATH__' },
  });
  t.deepEqual(portmap, { type: 'portmap', snat: true, capabilities: { portMappings: true } });
  const custom = plugin({
    calicoNetwork: {
      mtu: 1400,
      linuxPolicySetupTimeoutSeconds: 10,
      hostPorts: 'Disabled',
      containerIPForwarding: 'Enabled',
      ipPools: [{ cidr: 'fd00::/48' }],
    },
    logging: { cni: { logSeverity: 'Debug', logFileMaxSize: '1Gi' } },
  });
  t.is(custom.length, 1, 'no portmap with hostPorts Disabled');
  t.like(custom[0], {
    mtu: 1400,
    policy_setup_timeout_seconds: 10,
    log_level: 'Debug',
    log_file_max_size: 1024,
    container_settings: { allow_ip_forwarding: true },
    ipam: { type: 'netplug-ipam', assign_ipv4: 'false', assign_ipv6: 'true' },
  });
  const hostLocal = (pools: string[]) =>
    plugin({ cni: { ipam: { type: 'HostLocal' } }, calicoNetwork: { ipPools: pools.map((cidr) => ({ cidr })) } })[0].ipam;
  t.deepEqual(hostLocal([]), { type: 'host-local', subnet: 'usePodCidr' });
  t.deepEqual(hostLocal(['10.0.0.0/16']), { type: 'host-local', subnet: 'usePodCidr' });
  t.deepEqual(hostLocal(['fd00::/48']), { type: 'host-local', subnet: 'usePodCidrIPv6' });
  t.deepEqual(hostLocal(['10.0.0.0/16', 'fd00::/48']), {
    type: 'host-local',
    ranges: [[{ subnet: 'usePodCidr' }], [{ subnet: 'usePodCidrIPv6' }]],
  });
  t.not(
    configHash({ config: renderCniConfig(filled({})) }),
    configHash({ config: renderCniConfig(filled({ calicoNetwork: { linuxPolicySetupTimeoutSeconds: 10 } })) }),
  );
});

test('pools as netplug documents in IPPool objects labelled managed-by; adoption compares the fields the Installation sets', (t) => {
  const now = new Date('2026-01-01T00:00:00Z');
  const [v4, v6] = desiredPools(
    filled({ calicoNetwork: { ipPools: [{ cidr: '10.244.0.0/16', encapsulation: 'VXLANCrossSubnet' }, { cidr: 'fd00::/48' }] } }),
    now,
  );
  t.deepEqual(v4?.spec, {
    cidr: '10.244.0.0/16',
    blockSize: 26,
    nodeSelector: 'all()',
    ipipMode: 'Never',
    vxlanMode: 'CrossSubnet',
    natOutgoing: true,
    disabled: false,
  });
  t.deepEqual(v6?.spec, {
    cidr: 'fd00::/48',
    blockSize: 122,
    nodeSelector: 'all()',
    ipipMode: 'Never',
    vxlanMode: 'Never',
    natOutgoing: false,
    disabled: false,
  });
  const object = poolObject(v4 as NonNullable<typeof v4>);
  t.like(object, {
    apiVersion: 'crd.projectnet.org/v1',
    kind: 'IPPool',
    metadata: {
      name: 'default-ipv4-ippool',
      labels: { 'app.kubernetes.io/managed-by': 'netplug-operator' },
      annotations: { 'projectnet.org/key': '/netplug/resources/v3/projectnet.org/ippools/default-ipv4-ippool' },
    },
  });
  t.true(samePool(v4?.spec as never, { ...(v4?.spec as object) } as never));
  t.false(samePool(v4?.spec as never, { ...(v4?.spec as object), natOutgoing: false } as never));
});

test("the node pod's operator variant: cni-config/config, host paths, NO_DEFAULT_POOLS, USE_POD_CIDR iff HostLocal, the hash", (t) => {
  const system = renderSystem(filled({ cni: { binDir: '/x/bin', confDir: '/x/net.d', ipam: { type: 'HostLocal' } } }), 'img:1');
  const pod = (system.daemonSet as any).spec.template;
  const [agent, installer] = pod.spec.containers;
  const env = (container: { env: { name: string; value?: string; valueFrom?: unknown }[] }) =>
    Object.fromEntries(container.env.map((e) => [e.name, e.value ?? e.valueFrom]));
  t.like(env(agent), { DATASTORE_TYPE: 'kubernetes', NO_DEFAULT_POOLS: 'true', USE_POD_CIDR: 'true' });
  t.false('NETPLUG_IPV4POOL_CIDR' in env(agent));
  t.like(env(installer), {
    CNI_NET_DIR: '/x/net.d',
    NETPLUG_CONFIG_MAP: 'cni-config',
    NETPLUG_CONFIG_MAP_KEY: 'config',
    CNI_NETWORK_CONFIG: { configMapKeyRef: { name: 'cni-config', key: 'config' } },
  });
  t.false('CNI_MTU' in env(installer));
  t.deepEqual(
    pod.spec.volumes.filter((v: any) => v.hostPath).map((v: any) => v.hostPath.path),
    ['/x/bin', '/x/net.d', '/var/lib/netplug', '/var/run/netplug', '/var/log/netplug/cni'],
  );
  t.is(pod.metadata.annotations['hash.operator.projectnet.org/cni-config'], configHash((system.configMap as any).data));
  // The fast path (default Enabled): the agent and install-cni both told; off with spec.cni.fastPath Disabled.
  t.like(env(agent), { FAST_PATH: 'true', NETPLUG_AGENT_SOCKET: '/var/run/netplug/cni.sock', NETPLUG_METRICS_ADDR: ':9091' });
  t.like(env(installer), { FAST_PATH: 'true' });
  const off = (renderSystem(filled({ cni: { fastPath: 'Disabled' } }), 'img:1').daemonSet as any).spec.template.spec.containers;
  t.deepEqual(
    off.map((c: any) => env(c).FAST_PATH),
    ['false', 'false'],
  );
  // The agent sees the plugin's host paths at the same paths, the Installation's and a moved layout's.
  const moved = renderSystem(filled({ cni: { binDir: '/x/bin', confDir: '/x/net.d' } }), 'img:1', {
    stateDir: '/x/state',
    cniLogFile: '/x/log/cni.log',
    agentSocket: '/x/run/agent.sock',
  });
  const movedAgent = (moved.daemonSet as any).spec.template.spec.containers[0];
  t.deepEqual(
    movedAgent.volumeMounts.map((m: any) => [m.mountPath, m.mountPropagation ?? '', m.readOnly ?? false]),
    [
      ['/x/state', '', false],
      ['/x/run', '', false],
      ['/x/bin', '', true],
      ['/x/net.d', '', true],
      ['/x/log', '', false],
    ],
  );
  // The status files go to the moved socket's directory, where the plugin looks.
  t.like(env(movedAgent), { NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: '/x/run' });
  t.is(JSON.parse((moved.configMap as any).data.config).plugins[0].endpoint_status_dir, '/x/run/endpoint-status');
  t.like(env(movedAgent), { NETPLUG_VAR_DIR: '/x/state', NETPLUG_AGENT_SOCKET: '/x/run/agent.sock' });
  t.false('USE_POD_CIDR' in env((renderSystem(filled({}), 'img:1').daemonSet as any).spec.template.spec.containers[0]));
  // Network policy (spec.policy, default Enabled): the agent enforces it and writes its status
  // files where the plugin waits for them; another prefix is a host volume of its own.
  t.deepEqual(filled({}).policy, { enforcement: 'Enabled' });
  t.like(env(agent), { NETPLUG_POLICY_ENFORCEMENT: 'true', NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: '/var/run/netplug' });
  const unfilled = renderSystem({}, 'img:1');
  t.like(env((unfilled.daemonSet as any).spec.template.spec.containers[0]), { NETPLUG_POLICY_ENFORCEMENT: 'true' });
  t.is(plugin({})[0].endpoint_status_dir, '/var/run/netplug/endpoint-status');
  const policyOff = renderSystem(filled({ policy: { enforcement: 'Disabled', endpointStatusPathPrefix: '/srv/np' } }), 'img:1');
  const offPod = (policyOff.daemonSet as any).spec.template.spec;
  t.like(env(offPod.containers[0]), { NETPLUG_POLICY_ENFORCEMENT: 'false', NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: '/srv/np' });
  t.is(JSON.parse((policyOff.configMap as any).data.config).plugins[0].endpoint_status_dir, '/srv/np/endpoint-status');
  t.deepEqual(
    offPod.volumes.find((v: any) => v.name === 'endpoint-status'),
    { name: 'endpoint-status', hostPath: { path: '/srv/np/endpoint-status', type: 'DirectoryOrCreate' } },
  );
  t.true(offPod.containers[0].volumeMounts.some((m: any) => m.name === 'endpoint-status' && m.mountPath === '/srv/np/endpoint-status'));
  t.true(system.cniRbac.every((o) => o.metadata.name === 'netplug-cni-plugin'));
  const role = system.rbac.find((o) => o.kind === 'Role') as any;
  t.true(role.rules.some((r: any) => r.resources.includes('configmaps') && r.resourceNames.includes('cni-config')));
});

test('kubeadm podSubnet: every CIDR of the comma-separated list', (t) => {
  t.deepEqual(podSubnetsOf('networking:\n  podSubnet: 10.244.0.0/16,fd00:10:244::/56\n'), ['10.244.0.0/16', 'fd00:10:244::/56']);
  t.deepEqual(podSubnetsOf('networking: {}\n'), []);
  t.deepEqual(podSubnetsOf(': : :'), []);
});

test('conditions (§A.3): Progressing until the controller has seen the generation and all pods are ready; Available then', (t) => {
  t.like(daemonSetState('netplug-node', { metadata: { generation: 2 }, status: { observedGeneration: 1 } as never }), {
    available: false,
    progressing: true,
  });
  t.like(
    daemonSetState('netplug-node', {
      metadata: { generation: 2 },
      status: {
        observedGeneration: 2,
        desiredNumberScheduled: 3,
        updatedNumberScheduled: 2,
        numberReady: 2,
        numberAvailable: 2,
        currentNumberScheduled: 3,
        numberMisscheduled: 0,
      },
    }),
    { available: false, progressing: true, message: 'DaemonSet netplug-node is rolling out: 2 of 3 pods updated' },
  );
  const ready = {
    observedGeneration: 1,
    desiredNumberScheduled: 1,
    updatedNumberScheduled: 1,
    numberReady: 1,
    numberAvailable: 1,
    currentNumberScheduled: 1,
    numberMisscheduled: 0,
  };
  t.like(daemonSetState('netplug-node', { metadata: { generation: 1 }, status: ready }), { available: true, progressing: false });
  // An apply that changed the template answers with generation 2 while the cache still holds the
  // rolled-out generation 1: the state is the apply's (RolloutPending), not the cache's Available.
  const cached = { metadata: { generation: 1 }, status: ready };
  const applied = { metadata: { generation: 2 }, status: ready };
  t.like(daemonSetState('netplug-node', newest(cached, applied)), { available: false, reason: 'RolloutPending' });
  t.is(newest(cached, { metadata: { generation: 1 } }), cached, 'the same generation: the cache, whose status is the newer');
  t.is(newest(cached, undefined), cached);
  t.is(newest(undefined, applied), applied);
  t.like(
    deploymentState('c', {
      metadata: { generation: 1 },
      spec: { replicas: 1 } as never,
      status: { observedGeneration: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 },
    }),
    { available: true },
  );
  const before = conditionsOf({ available: true, progressing: false, message: '' }, undefined, [], new Date(0));
  const after = conditionsOf(
    { available: true, progressing: false, message: '' },
    { reason: 'InvalidConfiguration', message: 'x' },
    before,
    new Date(1000),
  );
  t.like(after[0], { type: 'Available', status: 'False', message: 'x' });
  t.like(after[2], {
    type: 'Degraded',
    status: 'True',
    reason: 'InvalidConfiguration',
    message: 'x',
    lastTransitionTime: new Date(1000).toISOString(),
  });
  t.is(after[1]?.lastTransitionTime, new Date(0).toISOString(), 'an unchanged condition keeps its transition time');
});

test('failing pods: waiting reasons that no wait cures, named by pod and container', (t) => {
  const pod = (name: string, reason: string) => ({
    metadata: { name, namespace: 'netplug-system' },
    status: {
      containerStatuses: [{ name: 'install-cni', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason } } }],
    },
  });
  t.is(failingPods([pod('a', 'ContainerCreating')]), undefined);
  t.deepEqual(failingPods([pod('a', 'ContainerCreating'), pod('b', 'ImagePullBackOff')]), {
    reason: 'PodFailure',
    message: 'pod netplug-system/b container install-cni: ImagePullBackOff',
  });
});

test('conditions say why: a reason per state and problem, the generation they describe, Degraded False as expected', (t) => {
  const rolling = daemonSetState('netplug-node', {
    metadata: { generation: 3 },
    status: {
      observedGeneration: 3,
      desiredNumberScheduled: 2,
      updatedNumberScheduled: 1,
      numberReady: 1,
      numberAvailable: 1,
      currentNumberScheduled: 2,
      numberMisscheduled: 0,
    },
  });
  t.is(rolling.reason, 'RollingOut');
  t.is(daemonSetState('netplug-node', undefined).reason, 'NotYetCreated');
  t.is(deploymentState('c', { metadata: { generation: 2 }, status: { observedGeneration: 1 } }).reason, 'RolloutPending');
  const draining = poolsState(['IP pool "old" is disabled and drains: 2 addresses still allocated']);
  t.like(draining, { available: false, progressing: true, reason: 'IPPoolDraining' });
  const both = combine([{ available: true, progressing: false, message: '' }, draining]);
  t.like(both, { available: false, progressing: true, reason: 'IPPoolDraining' });

  const [available, progressing, degraded] = conditionsOf(both, undefined, [], new Date(0), 7);
  t.like(available, { type: 'Available', status: 'False', reason: 'IPPoolDraining', observedGeneration: 7 });
  t.like(progressing, { type: 'Progressing', status: 'True', reason: 'IPPoolDraining', observedGeneration: 7 });
  t.regex(progressing?.message ?? '', /IP pool "old" is disabled and drains/);
  t.like(degraded, { type: 'Degraded', status: 'False', reason: 'AsExpected', message: '', observedGeneration: 7 });

  const invalid = { reason: 'InvalidConfiguration' as const, message: 'spec.calicoNetwork.mtu 20 must be 0 (auto) or from 68 to 65535' };
  const refused = conditionsOf({ available: false, progressing: false, message: '' }, invalid, [], new Date(0), 8);
  t.deepEqual(
    refused.map((c) => [c.type, c.status, c.reason, c.observedGeneration]),
    [
      ['Available', 'False', 'InvalidConfiguration', 8],
      ['Progressing', 'False', 'InvalidConfiguration', 8],
      ['Degraded', 'True', 'InvalidConfiguration', 8],
    ],
  );
  t.is(refused[2]?.message, invalid.message);
  const fine = conditionsOf({ available: true, progressing: false, message: '' }, undefined, [], new Date(0), 9);
  t.deepEqual(
    fine.map((c) => [c.type, c.status, c.reason]),
    [
      ['Available', 'True', 'AllObjectsAvailable'],
      ['Progressing', 'False', 'AllObjectsAvailable'],
      ['Degraded', 'False', 'AsExpected'],
    ],
  );
  t.false(sameConditions(fine, conditionsOf({ available: true, progressing: false, message: '' }, undefined, fine, new Date(0), 10)));
});
