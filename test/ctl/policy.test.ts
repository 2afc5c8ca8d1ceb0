// netplugctl's network policy commands, the built executable, on both datastores (a real etcd and a
// real kube-apiserver with netplug's CRDs): apply -f (YAML, JSON, several documents, stdin), get
// (tables, -o yaml|json that apply takes back), delete (by name, by file), explain pod; and
// refusals that name the file, the document, the field and the value, with nothing written. The
// built-in profile projectnet-default-allow is there on both, allows all, and is neither changed
// nor deleted.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';
import * as k8s from '@kubernetes/client-node';
import { load } from 'js-yaml';

import { keys } from '../../ts/model/keys.ts';
import { workloadEndpoint } from '../../ts/model/workload-endpoint.ts';
import { openStore } from '../../ts/store/open.ts';
import { hasStackTrace, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import { createPod, installCrds, startKube, type Kube } from '../helpers/kube.ts';

interface Outcome {
  status: number | null;
  stdout: string;
  stderr: string;
}

type Ctl = (args: string[], input?: string) => Outcome;

function runner(flags: string[]): Ctl {
  return (args, input) => {
    const run = spawnSync(NETPLUGCTL, [...flags, ...args], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin' },
      timeout: 60_000,
      ...(input !== undefined ? { input } : {}),
    });
    return { status: run.status, stdout: run.stdout, stderr: run.stderr };
  };
}

function ok(t: ExecutionContext, ctl: Ctl, args: string[], input?: string): string {
  const run = ctl(args, input);
  t.is(run.status, 0, `netplugctl ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

/** Exits non-zero with one line on stderr matching `message`, nothing on stdout, no stack trace. */
function refusedWith(t: ExecutionContext, run: Outcome, exitCode: number, message: RegExp): void {
  t.is(run.status, exitCode, run.stderr);
  t.is(run.stdout, '');
  t.is(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
  t.regex(run.stderr.trimEnd(), message);
  t.false(hasStackTrace(run.stderr));
}

const RESOURCES = `apiVersion: projectnet.org/v3
kind: NetworkPolicy
metadata: {name: web, namespace: shop}
spec:
  tier: security
  order: 10
  selector: app == "web"
  ingress:
    - action: Allow
      protocol: TCP
      source: {selector: app == "lb"}
      destination: {ports: [80, http]}
    - action: Deny
---
apiVersion: projectnet.org/v3
kind: Tier
metadata: {name: security}
spec: {order: 100}
---
apiVersion: projectnet.org/v3
kind: GlobalNetworkPolicy
metadata: {name: no-ssh}
spec:
  order: 1
  ingress:
    - {action: Deny, protocol: TCP, destination: {ports: [22]}}
---
apiVersion: projectnet.org/v3
kind: NetworkSet
metadata: {name: partners, namespace: shop, labels: {role: partner}}
spec: {nets: [192.168.10.0/24]}
---
apiVersion: projectnet.org/v3
kind: GlobalNetworkSet
metadata: {name: internet, labels: {role: internet}}
spec: {nets: [0.0.0.0/0]}
`;

const CREATED = [
  'NetworkPolicy "shop/web" created',
  'Tier "security" created',
  'GlobalNetworkPolicy "no-ssh" created',
  'NetworkSet "shop/partners" created',
  'GlobalNetworkSet "internet" created',
];

/** What both datastores must do the same way. */
async function lifecycle(t: ExecutionContext, ctl: Ctl): Promise<void> {
  const dir = tempDir(t, 'policy-ctl');
  const file = join(dir, 'resources.yaml');
  writeFileSync(file, RESOURCES);
  t.is(ok(t, ctl, ['apply', '-f', file]), `${CREATED.join('\n')}\n`);
  t.is(ok(t, ctl, ['apply', '-f', file]), `${CREATED.map((line) => line.replace('created', 'unchanged')).join('\n')}\n`);

  const policies = ok(t, ctl, ['get', 'networkpolicy', '-n', 'shop']).split('\n');
  t.regex(policies[0] ?? '', /^NAMESPACE\s+NAME\s+TIER\s+ORDER\s+SELECTOR\s+TYPES\s+INGRESS\s+EGRESS$/);
  t.regex(policies[1] ?? '', /^shop\s+web\s+security\s+10\s+app == "web"\s+Ingress\s+2\s+0$/);
  t.regex(ok(t, ctl, ['get', 'np']), /^no resources found\n$/, 'the default namespace has none');
  t.regex(ok(t, ctl, ['get', 'np', '-A']), /shop\s+web/);
  const tiers = ok(t, ctl, ['get', 'tiers']);
  t.regex(tiers, /^NAME\s+ORDER\s+DEFAULT ACTION\ndefault\s+1000000\s+Deny\nsecurity\s+100\s+Deny\n$/);

  // -o yaml gives the document back, defaults filled in; apply takes it back unchanged.
  const yaml = ok(t, ctl, ['get', 'np', 'web', '-n', 'shop', '-o', 'yaml']);
  t.like(load(yaml), {
    apiVersion: 'projectnet.org/v3',
    kind: 'NetworkPolicy',
    metadata: { name: 'web', namespace: 'shop' },
    spec: { tier: 'security', order: 10, types: ['Ingress'], selector: 'app == "web"' },
  });
  t.is(ok(t, ctl, ['apply', '-f', '-'], yaml), 'NetworkPolicy "shop/web" unchanged\n');
  const list = JSON.parse(ok(t, ctl, ['get', 'globalnetworkset', '-o', 'json']));
  t.like(list, {
    kind: 'List',
    items: [{ kind: 'GlobalNetworkSet', metadata: { name: 'internet', labels: { role: 'internet' } }, spec: { nets: ['0.0.0.0/0'] } }],
  });
  t.is(
    ok(
      t,
      ctl,
      ['apply', '-f', '-', '-n', 'shop'],
      JSON.stringify({
        apiVersion: 'projectnet.org/v3',
        kind: 'NetworkPolicy',
        metadata: { name: 'web' },
        spec: { ...(load(yaml) as { spec: object }).spec, order: 20 },
      }),
    ),
    'NetworkPolicy "shop/web" configured\n',
    'JSON on stdin, the namespace from -n',
  );
  t.regex(ok(t, ctl, ['get', 'np', 'web', '-n', 'shop']), /shop\s+web\s+security\s+20\s/);

  // Refusals: one line, nothing written.
  const bad = `apiVersion: projectnet.org/v3
kind: GlobalNetworkSet
metadata: {name: first}
spec: {nets: [10.0.0.0/8]}
---
apiVersion: projectnet.org/v3
kind: NetworkPolicy
metadata: {name: bad, namespace: shop}
spec:
  ingress:
    - action: Accept
`;
  refusedWith(
    t,
    ctl(['apply', '-f', '-'], bad),
    2,
    /^netplugctl: stdin, document 2: NetworkPolicy "shop\/bad": field "spec\.ingress\[0\]\.action" must be one of Allow, Deny, Pass, Log, got "Accept"$/,
  );
  refusedWith(t, ctl(['get', 'globalnetworkset', 'first']), 1, /^netplugctl: GlobalNetworkSet "first" does not exist$/);
  refusedWith(
    t,
    ctl(['apply', '-f', '-'], bad.replace('Accept', 'Allow\n      source: {selector: app = "x"}')),
    2,
    /^netplugctl: stdin, document 2: NetworkPolicy "shop\/bad": field "spec\.ingress\[0\]\.source\.selector" is not a selector: selector "app = "x""/,
  );
  refusedWith(
    t,
    ctl(['apply', '-f', '-'], bad.replace('action: Accept', 'action: Allow\n      protocol: TCP\n      destination: {ports: [99999]}')),
    2,
    /field "spec\.ingress\[0\]\.destination\.ports\[0\]" must be a port from 0 to 65535.*, got 99999$/,
  );
  refusedWith(
    t,
    ctl(['apply', '-f', '-'], bad.replace('spec:\n  ingress:\n    - action: Accept', 'spec:\n  tier: nope')),
    1,
    /^netplugctl: stdin, document 2: NetworkPolicy "shop\/bad": field "spec\.tier": tier "nope" does not exist; apply a Tier named "nope" first/,
  );
  refusedWith(
    t,
    ctl(['apply', '-f', '-'], 'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: k}\nspec: {podSelector: {}}\n'),
    2,
    /a Kubernetes NetworkPolicy \(networking\.k8s\.io\/v1\): apply it with kubectl/,
  );
  refusedWith(t, ctl(['apply', '-f', '-'], 'kind: [unclosed'), 2, /^netplugctl: stdin is neither YAML nor JSON/);
  refusedWith(t, ctl(['apply', '-f', join(dir, 'missing.yaml')]), 2, /^netplugctl: -f .*missing\.yaml: ENOENT$/);
  refusedWith(t, ctl(['get', 'pools']), 2, /^netplugctl: kind "pools" is not one netplugctl knows/);
  refusedWith(
    t,
    ctl(['delete', 'tier', 'security']),
    1,
    /^netplugctl: Tier "security" still has 1 policy \(shop\/web…\); delete or move them first$/,
  );
  refusedWith(t, ctl(['delete', 'np', 'nope', '-n', 'shop']), 1, /^netplugctl: NetworkPolicy "shop\/nope" does not exist$/);
  refusedWith(t, ctl(['get', 'np', 'web', '-A']), 2, /give -n NAMESPACE, not -A/);
  refusedWith(t, ctl(['apply']), 2, /^netplugctl: apply needs -f FILE/);
  t.regex(
    ok(t, ctl, ['get', 'gns']),
    /^NAME\s+NETS\s+LABELS\ninternet\s+0\.0\.0\.0\/0\s+role=internet\n$/,
    'nothing of the refused files was written',
  );
  builtInProfileChecks(t, ctl);

  t.is(ok(t, ctl, ['delete', 'networkpolicy', 'web', '-n', 'shop']), 'NetworkPolicy "shop/web" deleted\n');
  t.is(
    ok(t, ctl, ['delete', '-f', file]),
    'NetworkPolicy "shop/web" did not exist\nTier "security" deleted\nGlobalNetworkPolicy "no-ssh" deleted\nNetworkSet "shop/partners" deleted\nGlobalNetworkSet "internet" deleted\n',
  );
  t.regex(ok(t, ctl, ['get', 'tier']), /^NAME\s+ORDER\s+DEFAULT ACTION\ndefault\s+1000000\s+Deny\n$/);
}

const DEFAULT_ALLOW = {
  apiVersion: 'projectnet.org/v3',
  kind: 'Profile',
  metadata: { name: 'projectnet-default-allow' },
  spec: { ingress: [{ action: 'Allow' }], egress: [{ action: 'Allow' }] },
};
const BUILT_IN = /^netplugctl: (stdin, document 1: )?Profile projectnet-default-allow is built in: it cannot be changed or deleted$/;

/** The built-in profile: shown as it is, allowing all; apply and delete refuse it (by name, by file, even unchanged). */
function builtInProfileChecks(t: ExecutionContext, ctl: Ctl): void {
  const json = ok(t, ctl, ['get', 'profile', 'projectnet-default-allow', '-o', 'json']);
  t.deepEqual(JSON.parse(json), DEFAULT_ALLOW);
  t.deepEqual(load(ok(t, ctl, ['get', 'profiles', 'projectnet-default-allow', '-o', 'yaml'])), DEFAULT_ALLOW);
  t.regex(ok(t, ctl, ['get', 'profiles']), /\nprojectnet-default-allow\n/);
  refusedWith(t, ctl(['apply', '-f', '-'], json), 1, BUILT_IN);
  const denying = JSON.stringify({ ...DEFAULT_ALLOW, spec: { ingress: [{ action: 'Deny' }] } });
  refusedWith(t, ctl(['apply', '-f', '-'], denying), 1, BUILT_IN);
  refusedWith(t, ctl(['delete', 'profile', 'projectnet-default-allow']), 1, BUILT_IN);
  refusedWith(t, ctl(['delete', '-f', '-'], json), 1, BUILT_IN);
  t.deepEqual(JSON.parse(ok(t, ctl, ['get', 'profile', 'projectnet-default-allow', '-o', 'json'])), DEFAULT_ALLOW, 'unchanged');
}

/** The policies explain is asked about, the same on both datastores (profiles come from the datastore's side). */
const EXPLAINED = `${RESOURCES}`;

function explainChecks(t: ExecutionContext, ctl: Ctl): void {
  t.regex(ok(t, ctl, ['apply', '-f', '-'], EXPLAINED), /created/);
  const listed = ok(t, ctl, ['explain', 'pod', 'shop/web']);
  t.regex(
    listed,
    /^pod shop\/web \(node [^,]*, 10\.70\.0\.1\)\ningress policies, in order:\n {2}1\. tier security, order 10: NetworkPolicy shop\/web\n {2}2\. tier default, order 1: GlobalNetworkPolicy no-ssh\negress: no policy applies \(its profiles allow all\)\n$/,
  );
  const allowed = ok(t, ctl, ['explain', 'pod', 'shop/web', '--peer', 'shop/lb', '--port', '80/TCP', '--direction', 'ingress']);
  t.regex(
    allowed,
    /\nshop\/lb → shop\/web 80\/TCP: allowed\n {2}egress of shop\/lb: allowed by profile kns\.shop \(no policy decided\)\n {2}ingress of shop\/web: allowed by Allow rule 0 of NetworkPolicy shop\/web \(tier security\)\n/,
  );
  t.regex(
    ok(t, ctl, ['explain', 'pod', 'shop/web', '--peer', 'shop/lb', '--port', '8080/TCP', '--direction', 'ingress']),
    /80\/TCP: allowed\n.*\n.*by Allow rule 0/,
    'the named port http of shop/web is 8080',
  );
  t.regex(
    ok(t, ctl, ['explain', 'pod', 'shop/web', '--peer', '192.168.10.5', '--port', '80/TCP', '--direction', 'ingress']),
    /192\.168\.10\.5 → shop\/web 80\/TCP: denied\n {2}ingress of shop\/web: denied by Deny rule 1 of NetworkPolicy shop\/web \(tier security\)\n/,
  );
  t.regex(
    ok(t, ctl, ['explain', 'pod', 'shop/web', '--peer', 'shop/lb', '--port', '80/UDP', '--direction', 'egress']),
    /shop\/web → shop\/lb 80\/UDP: denied\n {2}egress of shop\/web: allowed by profile kns\.shop \(no policy decided\)\n {2}ingress of shop\/lb: denied at the end of tier default: none of its policies for the pod allowed it\n/,
  );
  const json = JSON.parse(ok(t, ctl, ['explain', 'pod', 'shop/web', '--peer', 'shop/lb', '--port', '22/TCP', '-o', 'json']));
  t.like(json.flows[0], {
    direction: 'ingress',
    verdict: 'deny',
    decisions: [
      { direction: 'egress', verdict: 'allow' },
      { direction: 'ingress', verdict: 'deny', by: { kind: 'rule', policy: 'NetworkPolicy/shop/web', rule: 1, action: 'Deny' } },
    ],
  });
  refusedWith(t, ctl(['explain', 'pod', 'shop/nobody']), 1, /^netplugctl: no endpoint "shop\/nobody" is known$/);
  refusedWith(t, ctl(['explain', 'pod', 'shop/web', '--peer', 'shop/lb']), 2, /--peer needs --port/);
  refusedWith(
    t,
    ctl(['explain', 'pod', 'shop/web', '--peer', 'shop/lb', '--port', '80/ICMP']),
    2,
    /--port "80\/ICMP" must be PORT\/PROTOCOL/,
  );
  refusedWith(t, ctl(['explain', 'pod', 'web']), 2, /give the pod as NAMESPACE\/NAME/);
}

test('etcd: apply, get, delete and explain; refusals name the field and the value and write nothing', async (t) => {
  const etcd = await startEtcd(t);
  const ctl = runner([`--etcd-endpoints=${etcd.netconf.etcd_endpoints}`]);
  await lifecycle(t, ctl);

  // Profiles are documents on etcd (netplug-kube-controllers writes them); the pods' workload endpoints too (the plugin does).
  t.is(
    ok(
      t,
      ctl,
      ['apply', '-f', '-'],
      `apiVersion: projectnet.org/v3
kind: Profile
metadata: {name: kns.shop}
spec:
  labelsToApply: {pcns.projectnet.org/name: shop}
  ingress: [{action: Allow}]
  egress: [{action: Allow}]
`,
    ),
    'Profile "kns.shop" created\n',
  );
  const store = await openStore({ etcd_endpoints: etcd.netconf.etcd_endpoints });
  t.teardown(() => store.close());
  const endpoint = (
    pod: string,
    labels: Record<string, string>,
    address: string,
    ports = [] as { name: string; protocol: string; port: number }[],
  ) =>
    workloadEndpoint(
      'shop',
      {
        orchestrator: 'k8s',
        workload: '',
        node: 'node-a',
        containerID: `c-${pod}`,
        pod,
        endpoint: 'eth0',
        interfaceName: `cali${pod}`,
        mac: '0a:58:0a:00:00:05',
        ipNetworks: [`${address}/32`],
        profiles: ['kns.shop', 'ksa.shop.default'],
        ports,
      },
      labels,
    );
  const web = endpoint('web', { app: 'web' }, '10.70.0.1', [{ name: 'http', protocol: 'TCP', port: 8080 }]);
  const lb = endpoint('lb', { app: 'lb' }, '10.70.0.2');
  t.true(
    await store.commit([
      { key: keys.workloadEndpoint('shop', web.metadata.name), create: web },
      { key: keys.workloadEndpoint('shop', lb.metadata.name), create: lb },
    ]),
  );
  explainChecks(t, ctl);
  t.regex(
    ok(t, ctl, ['get', 'profile']),
    /^NAME\s+LABELS TO APPLY\nkns\.shop\s+pcns\.projectnet\.org\/name=shop\nprojectnet-default-allow\n$/,
  );
  // A stored copy that was changed behind netplugctl's back (netplug-kube-controllers puts it back):
  // netplugctl shows the profile as netplug-node has it, and still refuses to touch it.
  t.true(
    await store.commit([
      {
        key: keys.profile('projectnet-default-allow'),
        create: { ...DEFAULT_ALLOW, spec: { ingress: [{ action: 'Deny' }], egress: [{ action: 'Deny' }] } },
      },
    ]),
  );
  t.deepEqual(JSON.parse(ok(t, ctl, ['get', 'profile', 'projectnet-default-allow', '-o', 'json'])), DEFAULT_ALLOW);
  refusedWith(t, ctl(['delete', 'profile', 'projectnet-default-allow']), 1, BUILT_IN);
});

test('Kubernetes datastore: the same commands on projectnet.org/v3 objects, kubectl-shaped; explain reads pods and namespaces from the API', async (t) => {
  const kube: Kube = await startKube(t);
  await installCrds(kube);
  await kube.core.createNamespace({ body: { metadata: { name: 'shop', labels: { team: 'a' } } } });
  const ctl = runner(['--kubeconfig', kube.server.admin.kubeconfig]);
  await lifecycle(t, ctl);

  // What netplugctl wrote is what kubectl shows: the resource itself, in its namespace.
  t.regex(ok(t, ctl, ['apply', '-f', '-'], RESOURCES), /created/);
  const custom = kube.custom;
  const object = (await custom.getNamespacedCustomObject({
    group: 'projectnet.org',
    version: 'v3',
    namespace: 'shop',
    plural: 'networkpolicies',
    name: 'web',
  })) as any;
  t.like(object, {
    apiVersion: 'projectnet.org/v3',
    kind: 'NetworkPolicy',
    metadata: { name: 'web', namespace: 'shop' },
    spec: { tier: 'security', order: 10 },
  });
  t.is(object.metadata.annotations?.['projectnet.org/key'], undefined, 'the name gives the key back: no annotation');
  // One made with kubectl's shape is read by netplugctl too.
  await custom.createClusterCustomObject({
    group: 'projectnet.org',
    version: 'v3',
    plural: 'globalnetworksets',
    body: { apiVersion: 'projectnet.org/v3', kind: 'GlobalNetworkSet', metadata: { name: 'by-kubectl' }, spec: { nets: ['10.9.0.0/16'] } },
  });
  t.regex(ok(t, ctl, ['get', 'gns', 'by-kubectl']), /by-kubectl\s+10\.9\.0\.0\/16/);
  refusedWith(
    t,
    ctl(['apply', '-f', '-'], 'apiVersion: projectnet.org/v3\nkind: Profile\nmetadata: {name: kns.x}\nspec: {}\n'),
    1,
    /on the Kubernetes datastore profiles are computed from namespaces and service accounts/,
  );
  refusedWith(
    t,
    ctl(['apply', '-f', '-'], 'apiVersion: projectnet.org/v3\nkind: NetworkSet\nmetadata: {name: s, namespace: nowhere}\nspec: {}\n'),
    1,
    /NetworkSet "nowhere\/s": namespace "nowhere" does not exist$/,
  );
  const profiles = ok(t, ctl, ['get', 'profile']);
  t.regex(profiles, /kns\.shop\s+pcns\.kubernetes\.io\/metadata\.name=shop,pcns\.team=a,pcns\.projectnet\.org\/name=shop/);
  t.regex(profiles, /\nprojectnet-default-allow\n/, 'the built-in profile, computed with the others');
  t.regex(ok(t, ctl, ['delete', '-f', '-'], RESOURCES), /deleted/);

  for (const [name, labels, ip, ports] of [
    ['web', { app: 'web' }, '10.70.0.1', [{ name: 'http', containerPort: 8080, protocol: 'TCP' }]],
    ['lb', { app: 'lb' }, '10.70.0.2', []],
  ] as const) {
    await createPod(kube, { namespace: 'shop', name, labels, ports: [...ports] });
    const pod = await kube.core.readNamespacedPod({ namespace: 'shop', name });
    pod.status = { ...pod.status, podIP: ip, podIPs: [{ ip }] };
    await kube.core.replaceNamespacedPodStatus({ namespace: 'shop', name, body: pod });
  }
  explainChecks(t, ctl);
  // A Kubernetes NetworkPolicy joins tier default at order 1000.
  const networking = kube.config.makeApiClient(k8s.NetworkingV1Api);
  await networking.createNamespacedNetworkPolicy({
    namespace: 'shop',
    body: {
      metadata: { name: 'from-lb' },
      spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ _from: [{ podSelector: { matchLabels: { app: 'lb' } } }] }] },
    },
  });
  t.regex(ok(t, ctl, ['explain', 'pod', 'shop/web']), / {2}3\. tier default, order 1000: NetworkPolicy shop\/knp\.default\.from-lb\n/);
});
