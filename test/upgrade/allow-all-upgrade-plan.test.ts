// When `netplugctl upgrade` creates the temporary policy allow-all-upgrade, and where its step
// goes: pure logic, no cluster (the decision, the policy document, its place among the steps and
// among the policies it must come before). Under the real kubelet, with traffic:
// tool-manifest-kdd.test.ts and tool-manifest-etcd.test.ts.
import test from 'ava';

import { checkPolicyDocument } from '../../ts/model/policy-check.ts';
import type { NetworkPolicyResource } from '../../ts/model/policy.ts';
import { convertKubernetesPolicy } from '../../ts/policy/kubernetes.ts';
import { byTier, DEFAULT_TIER_INFO } from '../../ts/policy/order.ts';
import { policyProgram } from '../../ts/policy/program.ts';
import {
  ALLOW_ALL_UPGRADE,
  allowAllUpgradePolicy,
  decideAllowAllUpgrade,
  type UnenforcedPolicies,
} from '../../ts/upgrade/allow-all-upgrade.ts';
import type { Install } from '../../ts/upgrade/detect.ts';
import { stepsFor, type StepInputs } from '../../ts/upgrade/steps.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';

const none: UnenforcedPolicies = { kubernetes: [], netplug: [], hostEndpoints: [], earlierTiers: [] };
const oneKnp: UnenforcedPolicies = { ...none, kubernetes: ['shop/deny-all'], lowestOrder: 1000 };

test('from a release without a policy agent, into a cluster with a NetworkPolicy: created, ordered before it, and the plan says why', (t) => {
  const decision = decideAllowAllUpgrade('v3.30.0', oneKnp, false);
  if (!decision.create) return t.fail(decision.why);
  t.is(decision.order, 0);
  t.regex(decision.why, /^v3\.30\.0 enforced no network policy/);
  t.regex(decision.why, /1 Kubernetes NetworkPolicy\(ies\) \(NetworkPolicy shop\/deny-all\)/);
  t.regex(decision.why, new RegExp(`${NETPLUG_VERSION.replaceAll('.', '\\.')} would enforce`));
});

test('no step without policies, from a release that enforces already, or when skipped', (t) => {
  t.false(decideAllowAllUpgrade('v3.30.0', none, false).create);
  t.regex(decideAllowAllUpgrade('v3.30.0', none, false).why, /no network policy or host endpoint in the cluster/);
  const enforcing = decideAllowAllUpgrade('v3.31.0', oneKnp, false);
  t.false(enforcing.create);
  t.is(enforcing.why, 'v3.31.0 enforces network policy already');
  const skipped = decideAllowAllUpgrade('v3.30.0', oneKnp, true);
  t.false(skipped.create);
  t.regex(skipped.why, /^--skip-allow-all-upgrade: 1 Kubernetes NetworkPolicy\(ies\) .* enforced as soon as each node runs/);
  t.false(decideAllowAllUpgrade('v3.30.0', undefined, false).create);
});

test('netplug policies and host endpoints count too; the order goes below the lowest of tier default; earlier tiers are named', (t) => {
  const found: UnenforcedPolicies = {
    kubernetes: [],
    netplug: ['GlobalNetworkPolicy deny-egress', 'NetworkPolicy shop/web'],
    hostEndpoints: ['node1-eth0'],
    lowestOrder: -5.5,
    earlierTiers: ['security'],
  };
  const decision = decideAllowAllUpgrade('v3.29.2', found, false);
  if (!decision.create) return t.fail(decision.why);
  t.is(decision.order, -7);
  t.regex(
    decision.why,
    /2 netplug policy\(ies\), 1 host endpoint\(s\) \(GlobalNetworkPolicy deny-egress, NetworkPolicy shop\/web, HostEndpoint node1-eth0\)/,
  );
  t.regex(decision.why, /tier\(s\) security, ordered before tier default, still apply first/);
  const onlyHostEndpoints = decideAllowAllUpgrade('v3.30.0', { ...none, hostEndpoints: ['n1-eth0'] }, false);
  t.true(onlyHostEndpoints.create);
});

test('the policy is a valid GlobalNetworkPolicy: all(), both directions, Log then Allow, tier default', (t) => {
  const policy = checkPolicyDocument(allowAllUpgradePolicy(0)) as NetworkPolicyResource;
  t.is(policy.metadata.name, ALLOW_ALL_UPGRADE);
  t.is(policy.kind, 'GlobalNetworkPolicy');
  t.deepEqual(policy.spec.types, ['Ingress', 'Egress']);
  t.is(policy.spec.selector, 'all()');
  t.is(policy.spec.tier, 'default');
  for (const rules of [policy.spec.ingress, policy.spec.egress])
    t.deepEqual(
      rules?.map((rule) => rule.action),
      ['Log', 'Allow'],
    );
  t.is(policy.metadata.labels?.['projectnet.org/created-by'], 'netplugctl-upgrade');
});

test('netplug-node evaluates it before a Kubernetes NetworkPolicy (order 1000) and before a policy named before it at order 0', (t) => {
  const knp = convertKubernetesPolicy({
    metadata: { name: 'deny-all', namespace: 'shop' },
    spec: { podSelector: {}, policyTypes: ['Ingress'] },
  }).policy;
  const aardvark = checkPolicyDocument({
    apiVersion: 'projectnet.org/v3',
    kind: 'GlobalNetworkPolicy',
    metadata: { name: 'aardvark' },
    spec: { order: 0, selector: 'all()', ingress: [{ action: 'Deny' }] },
  }) as NetworkPolicyResource;
  const decision = decideAllowAllUpgrade('v3.30.0', { ...oneKnp, netplug: ['GlobalNetworkPolicy aardvark'], lowestOrder: 0 }, false);
  if (!decision.create) return t.fail(decision.why);
  const allowAll = checkPolicyDocument(allowAllUpgradePolicy(decision.order)) as NetworkPolicyResource;
  const programs = [knp, aardvark, allowAll].map((policy) => policyProgram(policy));
  const [tier] = byTier(programs, () => DEFAULT_TIER_INFO);
  t.deepEqual(
    tier?.programs.map((program) => program.display),
    [ALLOW_ALL_UPGRADE, 'aardvark', 'shop/knp.default.deny-all'],
  );
});

const install = (method: Install['method']): Install => ({
  method,
  namespace: method === 'manifest' ? 'kube-system' : 'netplug-system',
  datastore: 'kubernetes',
  ipam: 'netplug-ipam',
  usePodCidr: false,
  networking: 'netplug',
  upgradeIpam: false,
  nodes: [],
  imageVersions: ['v3.30.0'],
});

const inputs = (method: Install['method']): StepInputs => ({
  install: install(method),
  from: 'v3.30.0',
  target: NETPLUG_VERSION,
  objects: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'netplug-node', namespace: 'kube-system' }],
  crds: [{ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: 'globalnetworkpolicies.projectnet.org' }],
  storageChanges: [],
  legacyObjects: [],
  ownerReferences: 0,
  helm: method === 'helm' ? { release: 'netplug', namespace: 'netplug-operator', chart: 'c.tgz', version: '3.31.0' } : undefined,
  allowAllUpgrade: { why: 'because', policy: allowAllUpgradePolicy(0), order: 0, operation: 'POST GlobalNetworkPolicy allow-all-upgrade' },
});

test('the step comes after the CRDs (its kind) and before the step that deploys the new netplug-node, in every procedure; rollback deletes it', (t) => {
  for (const [method, deploys] of [
    ['manifest', 'apply-manifest'],
    ['operator', 'apply-operator'],
    ['helm', 'helm-upgrade'],
  ] as const) {
    const ids = stepsFor(inputs(method)).map((step) => step.id);
    t.is(ids.indexOf('allow-all-upgrade'), ids.indexOf('apply-crds') + 1, method);
    t.is(ids.indexOf(deploys), ids.indexOf('allow-all-upgrade') + 1, method);
  }
  const step = stepsFor(inputs('manifest')).find((s) => s.id === 'allow-all-upgrade');
  t.is(step?.rollback, 'delete-created');
  t.regex(step?.title ?? '', /Log, then Allow; tier default, order 0, before every other policy there\): because$/);
  t.deepEqual(step?.policy, allowAllUpgradePolicy(0));
  t.false(stepsFor({ ...inputs('manifest'), allowAllUpgrade: undefined }).some((s) => s.id === 'allow-all-upgrade'));
});
