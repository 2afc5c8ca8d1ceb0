// The policy resources' checks: valid documents pass with their defaults filled in; every kind of
// mistake is refused with the resource, the field's path and the value found.
import test from 'ava';

import { checkedPolicyEntry, checkPolicyDocument, PolicyDocumentError } from '../../ts/model/policy-check.ts';
import { keys } from '../../ts/model/keys.ts';
import { StoreDocumentError } from '../../ts/model/errors.ts';

const policy = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'projectnet.org/v3',
  kind: 'NetworkPolicy',
  metadata: { name: 'web', namespace: 'shop' },
  spec,
  ...extra,
});
const globalPolicy = (spec: Record<string, unknown>) => ({
  apiVersion: 'projectnet.org/v3',
  kind: 'GlobalNetworkPolicy',
  metadata: { name: 'hosts' },
  spec,
});

test('a valid policy passes with its defaults: tier default, selector all(), types from its rules', (t) => {
  const checked = checkPolicyDocument(
    policy({
      order: 100,
      egress: [{ action: 'Allow', protocol: 'UDP', destination: { ports: [53, 'dns', '8000:8080'] } }],
      ingress: [
        { action: 'Deny', source: { nets: ['10.0.0.0/8', '10.1.2.3'], notNets: ['10.1.0.0/16'] } },
        {
          action: 'Pass',
          source: { selector: 'app == "a"', namespaceSelector: 'global()', serviceAccounts: { names: ['x'], selector: 'has(t)' } },
        },
        { action: 'Log', protocol: 'ICMP', icmp: { type: 8, code: 0 }, notICMP: { type: 0 } },
        { action: 'Allow', protocol: 58, ipVersion: 6, source: { nets: ['fd00::/64'] } },
      ],
    }),
  );
  t.like(checked, {
    metadata: { name: 'web', namespace: 'shop' },
    spec: { tier: 'default', selector: 'all()', types: ['Ingress', 'Egress'], order: 100 },
  });
  t.deepEqual((checkPolicyDocument(policy({})) as { spec: { types: string[] } }).spec.types, ['Ingress']);
  t.is(
    checkPolicyDocument({ ...policy({}), metadata: { name: 'p' } }).metadata.namespace,
    'default',
    'a namespaced kind without a namespace is in default',
  );
  t.is(checkPolicyDocument({ ...policy({}), metadata: { name: 'p' } }, 'blue').metadata.namespace, 'blue');
  const global = checkPolicyDocument({
    apiVersion: 'projectnet.org/v3',
    kind: 'GlobalNetworkPolicy',
    metadata: { name: 'g' },
    spec: { namespaceSelector: 'all()', serviceAccountSelector: 'tier == "x"' },
  });
  t.is(global.kind, 'GlobalNetworkPolicy');
  // The host endpoint flags, as Calico takes them: preDNAT or doNotTrack with applyOnForward; a preDNAT policy ingress only.
  for (const spec of [
    { applyOnForward: true },
    { applyOnForward: false, preDNAT: false, doNotTrack: false, egress: [{ action: 'Allow' }] },
    { applyOnForward: true, preDNAT: true, ingress: [{ action: 'Deny', protocol: 'TCP', destination: { ports: [30080] } }] },
    { applyOnForward: true, preDNAT: true, types: ['Ingress'] },
    { applyOnForward: true, preDNAT: false, doNotTrack: true, types: ['Ingress', 'Egress'], egress: [{ action: 'Allow' }] },
  ]) {
    const checked = checkPolicyDocument(globalPolicy(spec));
    t.like(checked, { spec }, JSON.stringify(spec));
  }
  t.deepEqual((checkPolicyDocument(globalPolicy({ applyOnForward: true, preDNAT: true })) as { spec: { types: string[] } }).spec.types, [
    'Ingress',
  ]);
  for (const document of [
    {
      apiVersion: 'projectnet.org/v3',
      kind: 'GlobalNetworkSet',
      metadata: { name: 'out', labels: { set: 'out' } },
      spec: { nets: ['192.168.0.0/16', 'fd99::/64'] },
    },
    { apiVersion: 'projectnet.org/v3', kind: 'NetworkSet', metadata: { name: 'in', namespace: 'a' }, spec: { nets: [] } },
    { apiVersion: 'projectnet.org/v3', kind: 'Tier', metadata: { name: 'security' }, spec: { order: 100, defaultAction: 'Pass' } },
    { apiVersion: 'projectnet.org/v3', kind: 'Tier', metadata: { name: 'default' }, spec: { order: 1000000 } },
    {
      apiVersion: 'projectnet.org/v3',
      kind: 'Profile',
      metadata: { name: 'kns.a' },
      spec: { labelsToApply: { 'pcns.x': 'y' }, ingress: [{ action: 'Allow' }] },
    },
  ])
    t.notThrows(() => checkPolicyDocument(document), document.kind);
});

const refusals: [unknown, string, RegExp][] = [
  [policy({ ingress: [{ action: 'Accept' }] }), 'spec.ingress[0].action', /must be one of Allow, Deny, Pass, Log, got "Accept"/],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'tcp' }] }),
    'spec.ingress[0].protocol',
    /must be TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a number from 1 to 255, got "tcp"/,
  ],
  [policy({ ingress: [{ action: 'Allow', protocol: 300 }] }), 'spec.ingress[0].protocol', /must be at most 255, got 300/],
  [
    policy({ ingress: [{ action: 'Allow', destination: { ports: [80] } }] }),
    'spec.ingress[0].protocol',
    /must be TCP, UDP, SCTP or UDPLite when destination\.ports is given/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'ICMP', destination: { ports: [80] } }] }),
    'spec.ingress[0].protocol',
    /when destination\.ports is given.*got "ICMP"/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [70000] } }] }),
    'spec.ingress[0].destination.ports[0]',
    /must be a port from 0 to 65535.*got 70000/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: ['90:80'] } }] }),
    'spec.ingress[0].destination.ports[0]',
    /from ≤ to.*got "90:80"/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'TCP', source: { notPorts: ['Not_A_Name'] } }] }),
    'spec.ingress[0].source.notPorts[0]',
    /got "Not_A_Name"/,
  ],
  [policy({ ingress: [{ action: 'Allow', icmp: { type: 8 } }] }), 'spec.ingress[0].protocol', /must be ICMP or ICMPv6 when icmp is given/],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'ICMP', icmp: { code: 1 } }] }),
    'spec.ingress[0].icmp.code',
    /needs a type beside it, got 1/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'ICMP', icmp: { type: 255 } }] }),
    'spec.ingress[0].icmp.type',
    /must be at most 254, got 255/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', protocol: 'ICMP', ipVersion: 6 }] }),
    'spec.ingress[0].ipVersion',
    /must be 4 for protocol ICMP, got 6/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', ipVersion: 4, source: { nets: ['fd00::/8'] } }] }),
    'spec.ingress[0].source.nets[0]',
    /must be an IPv4 CIDR \(the rule's ipVersion\), got "fd00::\/8"/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', source: { nets: ['10.0.0.0/33'] } }] }),
    'spec.ingress[0].source.nets[0]',
    /must be a CIDR.*got "10\.0\.0\.0\/33"/,
  ],
  [
    policy({ ingress: [{ action: 'Allow', source: { selector: 'app = "x"' } }] }),
    'spec.ingress[0].source.selector',
    /is not a selector: selector "app = \\?"x\\?""/,
  ],
  [policy({ selector: 'has(' }), 'spec.selector', /is not a selector: selector "has\("/],
  [
    policy({ ingress: [{ action: 'Allow', source: { namespaceselector: 'all()' } }] }),
    'spec.ingress[0].source.namespaceselector',
    /is not a field netplug knows/,
  ],
  [policy({ namespaceSelector: 'all()' }), 'spec.namespaceSelector', /is not a field netplug knows/],
  [policy({ doNotTrack: true }), 'spec.doNotTrack', /must be absent: only a GlobalNetworkPolicy has it.*, got true$/],
  [policy({ applyOnForward: false }), 'spec.applyOnForward', /must be absent: only a GlobalNetworkPolicy has it.*, got false$/],
  [policy({ preDNAT: true }), 'spec.preDNAT', /must be absent: only a GlobalNetworkPolicy has it.*, got true$/],
  [globalPolicy({ applyOnForward: 'yes' }), 'spec.applyOnForward', /must be true or false, got "yes"/],
  [globalPolicy({ applyOnForward: true, preDNAT: 1 }), 'spec.preDNAT', /must be true or false, got 1/],
  [globalPolicy({ doNotTrack: null }), 'spec.doNotTrack', /must be true or false, got null/],
  [
    globalPolicy({ applyOnForward: true, preDNAT: true, doNotTrack: true }),
    'spec.doNotTrack',
    /must not be true with preDNAT: true \(a policy is applied before DNAT or untracked, not both\), got true$/,
  ],
  [globalPolicy({ preDNAT: true }), 'spec.applyOnForward', /must be true when preDNAT is true .*, got nothing$/],
  [globalPolicy({ doNotTrack: true, applyOnForward: false }), 'spec.applyOnForward', /must be true when doNotTrack is true .*, got false$/],
  [
    globalPolicy({ applyOnForward: true, preDNAT: true, egress: [{ action: 'Deny' }] }),
    'spec.egress',
    /must be empty when preDNAT is true \(a preDNAT policy has ingress rules only\), got \[\{"action":"Deny"\}\]$/,
  ],
  [
    globalPolicy({ applyOnForward: true, preDNAT: true, types: ['Ingress'], egress: [{ action: 'Deny' }] }),
    'spec.egress',
    /must be empty when preDNAT is true/,
  ],
  [
    globalPolicy({ applyOnForward: true, preDNAT: true, types: ['Ingress', 'Egress'] }),
    'spec.types',
    /must not include Egress when preDNAT is true \(a preDNAT policy applies to ingress only\), got \["Ingress","Egress"\]$/,
  ],
  [
    policy({ types: ['Ingress'], egress: [{ action: 'Allow' }] }),
    'spec.types',
    /must include Egress: the policy has egress rules, got \["Ingress"\]/,
  ],
  [policy({ types: ['Ingress', 'Ingress'] }), 'spec.types', /must not name a type twice/],
  [policy({ types: ['ingress'] }), 'spec.types[0]', /must be Ingress or Egress, got "ingress"/],
  [policy({ order: 'first' }), 'spec.order', /must be a number, got "first"/],
  [policy({ tier: 'Security' }), 'spec.tier', /must be a tier name, got "Security"/],
  [policy({}, { metadata: { name: 'Web' } }), 'metadata.name', /must be lower-case letters.*got "Web"/],
  [policy({}, { metadata: { name: 'knp.default.web', namespace: 'a' } }), 'metadata.name', /must not start with "knp\.default\."/],
  [policy({}, { apiVersion: 'projectcalico.org/v3' }), 'apiVersion', /must be projectnet\.org\/v3, got "projectcalico\.org\/v3"/],
  [
    policy({}, { kind: 'NetworkPolicyy' }),
    'kind',
    /must be one of NetworkPolicy, GlobalNetworkPolicy, NetworkSet, GlobalNetworkSet, Tier, Profile, got "NetworkPolicyy"/,
  ],
  [
    { apiVersion: 'projectnet.org/v3', kind: 'GlobalNetworkPolicy', metadata: { name: 'g', namespace: 'x' }, spec: {} },
    'metadata.namespace',
    /must be absent: the kind is not namespaced/,
  ],
  [
    { apiVersion: 'projectnet.org/v3', kind: 'GlobalNetworkSet', metadata: { name: 'g', labels: { 'bad key': 'x' } }, spec: {} },
    'metadata.labels.bad key',
    /label keys/,
  ],
  [
    { apiVersion: 'projectnet.org/v3', kind: 'Tier', metadata: { name: 'default' }, spec: { order: 5 } },
    'spec.order',
    /of tier default must be 1000000, got 5/,
  ],
  [
    { apiVersion: 'projectnet.org/v3', kind: 'Tier', metadata: { name: 't' }, spec: { defaultAction: 'Allow' } },
    'spec.defaultAction',
    /must be Deny or Pass, got "Allow"/,
  ],
  ['hello', '(top level)', /must be an object, got "hello"/],
];

test('mistakes are refused naming the resource, the field and the value', (t) => {
  for (const [document, field, message] of refusals) {
    const error = t.throws(() => checkPolicyDocument(document), { instanceOf: PolicyDocumentError }, JSON.stringify(document));
    t.is(error?.field, field, error?.message);
    t.regex(error?.message ?? '', message);
    t.true(error?.message.includes(`field "${field}"`), error?.message);
  }
  t.regex(
    t.throws(() => checkPolicyDocument(policy({ ingress: [{ action: 'Nope' }] })))?.message ?? '',
    /^NetworkPolicy "shop\/web": field/,
  );
});

test('a stored document that fails its check, or is not what its key names, is a broken document naming the key', (t) => {
  const key = keys.networkPolicy('shop', 'web');
  t.is(checkedPolicyEntry({ key, value: policy({}), revision: '1' }, 'NetworkPolicy').value.metadata.name, 'web');
  const wrongPlace = t.throws(
    () => checkedPolicyEntry({ key: keys.networkPolicy('other', 'web'), value: policy({}), revision: '1' }, 'NetworkPolicy'),
    {
      instanceOf: StoreDocumentError,
    },
  );
  t.regex(
    wrongPlace?.message ?? '',
    /document at .*networkpolicies\/other\/web is broken: .*is not the NetworkPolicy "other\/web" its key names/,
  );
  const broken = t.throws(() => checkedPolicyEntry({ key, value: policy({ order: 'x' }), revision: '1' }, 'NetworkPolicy'), {
    instanceOf: StoreDocumentError,
  });
  t.regex(broken?.message ?? '', /field "spec\.order" must be a number, got "x"; repair or remove it$/);
});
