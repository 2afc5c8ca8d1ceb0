// Kubernetes objects in netplug's model: a NetworkPolicy becomes knp.default.<name> in tier default
// at order 1000, each peer × protocol an Allow rule, pods only (never network sets); a rule that
// cannot be converted is left out and named; namespaces and service accounts become profiles.
import test from 'ava';

import { checkPolicyDocument } from '../../ts/model/policy-check.ts';
import { endpointOfPod } from '../../ts/policy/endpoints.ts';
import { convertKubernetesPolicy, namespaceProfile, serviceAccountProfile } from '../../ts/policy/kubernetes.ts';

test('a NetworkPolicy converts to knp.default.<name>, tier default, order 1000, its peers and ports as Allow rules', (t) => {
  const { policy, issues } = convertKubernetesPolicy({
    metadata: { name: 'web', namespace: 'shop', uid: 'u1' },
    spec: {
      podSelector: { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }] },
      ingress: [
        {
          from: [
            { podSelector: { matchLabels: { app: 'lb' } } },
            { namespaceSelector: {} },
            { ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0/16'] } },
          ],
          ports: [{ port: 80 }, { protocol: 'UDP', port: 'dns' }, { port: 8000, endPort: 8080 }, { protocol: 'SCTP' }],
        },
      ],
    },
  });
  t.deepEqual(issues, []);
  t.like(policy, {
    kind: 'NetworkPolicy',
    metadata: { name: 'knp.default.web', namespace: 'shop', uid: 'u1' },
    spec: { tier: 'default', order: 1000 },
  });
  t.is(policy.spec.selector, 'app == "web" && projectnet.org/orchestrator == "k8s" && tier != "db"');
  t.deepEqual(policy.spec.types, ['Ingress']);
  t.is(policy.spec.egress, undefined);
  const rules = policy.spec.ingress ?? [];
  t.is(rules.length, 9, '3 peers × 3 protocols');
  t.deepEqual(rules[0], {
    action: 'Allow',
    protocol: 'TCP',
    source: { selector: 'app == "lb" && projectnet.org/orchestrator == "k8s"' },
    destination: { ports: [80, '8000:8080'] },
  });
  t.deepEqual(rules[1], {
    action: 'Allow',
    protocol: 'UDP',
    source: { selector: 'app == "lb" && projectnet.org/orchestrator == "k8s"' },
    destination: { ports: ['dns'] },
  });
  t.deepEqual(rules[2], {
    action: 'Allow',
    protocol: 'SCTP',
    source: { selector: 'app == "lb" && projectnet.org/orchestrator == "k8s"' },
    destination: {},
  });
  t.deepEqual(rules[3]?.source, { selector: 'projectnet.org/orchestrator == "k8s"', namespaceSelector: 'all()' });
  t.deepEqual(rules[6]?.source, { nets: ['10.0.0.0/8'], notNets: ['10.1.0.0/16'] });
  t.notThrows(
    () => checkPolicyDocument({ ...policy, metadata: { ...policy.metadata, name: 'converted' } }),
    'the conversion is a valid netplug policy',
  );
});

test('policyTypes: absent means Ingress, and Egress when there are egress rules; given, exactly those', (t) => {
  const types = (spec: object) => convertKubernetesPolicy({ metadata: { name: 'p', namespace: 'a' }, spec }).policy.spec.types;
  t.deepEqual(types({ podSelector: {} }), ['Ingress']);
  t.deepEqual(types({ podSelector: {}, egress: [{}] }), ['Ingress', 'Egress']);
  t.deepEqual(types({ podSelector: {}, egress: [] }), ['Ingress']);
  t.deepEqual(types({ podSelector: {}, policyTypes: ['Egress'] }), ['Egress']);
  const denyAll = convertKubernetesPolicy({
    metadata: { name: 'p', namespace: 'a' },
    spec: { podSelector: {}, policyTypes: ['Ingress', 'Egress'] },
  }).policy;
  t.deepEqual([denyAll.spec.ingress, denyAll.spec.egress], [[], []], 'no rules: nothing allowed');
  const allowAll = convertKubernetesPolicy({ metadata: { name: 'p', namespace: 'a' }, spec: { podSelector: {}, ingress: [{}] } }).policy;
  t.deepEqual(allowAll.spec.ingress, [{ action: 'Allow', source: {}, destination: {} }]);
  const egress = convertKubernetesPolicy({
    metadata: { name: 'p', namespace: 'a' },
    spec: {
      podSelector: {},
      policyTypes: ['Egress'],
      egress: [{ to: [{ namespaceSelector: { matchLabels: { a: 'b' } }, podSelector: {} }], ports: [{ port: 53, protocol: 'UDP' }] }],
    },
  }).policy;
  t.deepEqual(egress.spec.egress, [
    {
      action: 'Allow',
      protocol: 'UDP',
      destination: { selector: 'projectnet.org/orchestrator == "k8s"', namespaceSelector: 'a == "b"', ports: [53] },
    },
  ]);
});

test('a rule that cannot be converted is left out and named; the others stay', (t) => {
  const { policy, issues } = convertKubernetesPolicy({
    metadata: { name: 'p', namespace: 'a' },
    spec: {
      podSelector: {},
      ingress: [
        { from: [{ podSelector: { matchExpressions: [{ key: 'x', operator: 'Near', values: ['y'] }] } }] },
        { from: [{ ipBlock: { cidr: 'ten/8' } }] },
        { ports: [{ protocol: 'ICMP', port: 1 }] },
        { ports: [{ port: 'web', endPort: 90 }] },
        { ports: [{ port: 80 }] },
      ],
    },
  });
  t.deepEqual(
    issues.map((i) => i.field),
    [
      'spec.ingress[0].from[0].podSelector.matchExpressions[0].operator',
      'spec.ingress[1].from[0].ipBlock.cidr',
      'spec.ingress[2].ports[0].protocol',
      'spec.ingress[3].ports[0].endPort',
    ],
  );
  t.regex(issues[0]?.message ?? '', /^rule left out: .*"Near" must be one of In, NotIn, Exists, DoesNotExist/);
  t.deepEqual(policy.spec.ingress, [{ action: 'Allow', protocol: 'TCP', source: {}, destination: { ports: [80] } }]);
});

test('namespaces and service accounts become profiles with prefixed labels that allow everything', (t) => {
  t.deepEqual(namespaceProfile({ metadata: { name: 'shop', labels: { team: 'a', 'projectnet.org/name': 'spoof' } } }), {
    kind: 'Profile',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'kns.shop' },
    spec: {
      labelsToApply: { 'pcns.team': 'a', 'pcns.projectnet.org/name': 'shop' },
      ingress: [{ action: 'Allow' }],
      egress: [{ action: 'Allow' }],
    },
  });
  t.deepEqual(serviceAccountProfile({ metadata: { name: 'api', namespace: 'shop', labels: { role: 'x' } } }).metadata.name, 'ksa.shop.api');
  t.deepEqual(serviceAccountProfile({ metadata: { name: 'api', namespace: 'shop', labels: { role: 'x' } } }).spec.labelsToApply, {
    'pcsa.role': 'x',
    'pcsa.projectnet.org/name': 'api',
  });
});

test('a pod is an endpoint with its labels, service account, addresses and named ports; a host-network pod is none', (t) => {
  t.deepEqual(
    endpointOfPod(
      {
        metadata: { name: 'web', namespace: 'shop', labels: { app: 'web' } },
        spec: {
          nodeName: 'n1',
          containers: [
            { ports: [{ name: 'http', containerPort: 8080 }, { containerPort: 9 }] },
            { ports: [{ name: 'dns', protocol: 'udp', containerPort: 53 }] },
          ],
        },
        status: { podIP: '10.0.0.5', podIPs: [{ ip: '10.0.0.5' }, { ip: 'fd00::5' }] },
      },
      'cali123',
    ),
    {
      key: 'shop/web',
      namespace: 'shop',
      name: 'web',
      labels: { app: 'web' },
      serviceAccount: 'default',
      addresses: ['10.0.0.5', 'fd00::5'],
      ports: [
        { name: 'http', protocol: 'TCP', port: 8080 },
        { name: 'dns', protocol: 'UDP', port: 53 },
      ],
      node: 'n1',
      interfaceName: 'cali123',
    },
  );
  t.is(endpointOfPod({ metadata: { name: 'h' }, spec: { hostNetwork: true } }), undefined);
});
