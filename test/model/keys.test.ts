// The model's keys are where the Kubernetes datastore looks for each kind: the model owns the
// layout, the datastore maps it to custom resources.
import test from 'ava';

import { keys } from '../../ts/model/keys.ts';
import { kindOfKey, kindsOfPrefix, NODES_PREFIX } from '../../ts/store/kubernetes/resources.ts';

test('each kind’s keys map to that kind on the Kubernetes datastore', (t) => {
  const kindOf = (key: string) => kindOfKey(key)?.kind.kind;
  t.is(kindOf(keys.pool('default')), 'IPPool');
  t.is(keys.nodes, NODES_PREFIX); // the cluster's own Node objects, not a custom resource
  t.is(kindOf(keys.workloadEndpoint('ns', 'node--a-k8s-pod-eth0')), 'WorkloadEndpoint');
  t.is(kindOf(keys.block('10.0.0.0/26')), 'IPAMBlock');
  t.is(kindOf(keys.affinity('node-a', '10.0.0.0/26')), 'BlockAffinity');
  t.is(kindOf(keys.handle('net.abc')), 'IPAMHandle');
  t.is(kindOf(keys.pendingRequest('node-a', 'net.abc')), 'IPAMPendingRequest');
  t.is(kindOf(keys.clusterInformation), 'ClusterInformation');
  t.is(kindOf(keys.hostEndpoint('node-a-auto-hep')), 'HostEndpoint');
  t.deepEqual(
    kindsOfPrefix(keys.hostEndpoints).map(({ kind }) => kind.kind),
    ['HostEndpoint'],
  );
  t.is(kindOf(keys.kubeControllersConfiguration), 'KubeControllersConfiguration');
});

test('the network policy kinds are native objects of projectnet.org/v3, namespaced where the resource is', (t) => {
  const found = (key: string) => {
    const hit = kindOfKey(key);
    return (
      hit && {
        kind: hit.kind.kind,
        apiVersion: `${hit.kind.group}/${hit.kind.version}`,
        native: hit.kind.native,
        place: hit.kind.place(hit.rest),
      }
    );
  };
  t.deepEqual(found(keys.networkPolicy('shop', 'web')), {
    kind: 'NetworkPolicy',
    apiVersion: 'projectnet.org/v3',
    native: true,
    place: { namespace: 'shop', name: 'web', labels: {} },
  });
  t.deepEqual(found(keys.networkSet('shop', 'outside')), {
    kind: 'NetworkSet',
    apiVersion: 'projectnet.org/v3',
    native: true,
    place: { namespace: 'shop', name: 'outside', labels: {} },
  });
  t.deepEqual(found(keys.globalNetworkPolicy('deny')), {
    kind: 'GlobalNetworkPolicy',
    apiVersion: 'projectnet.org/v3',
    native: true,
    place: { name: 'deny', labels: {} },
  });
  t.is(found(keys.globalNetworkSet('g'))?.kind, 'GlobalNetworkSet');
  t.is(found(keys.tier('security'))?.kind, 'Tier');
  t.is(found(keys.profile('kns.shop')), undefined, 'profiles are computed on the Kubernetes datastore, never stored');
  t.is(found(keys.pool('p'))?.apiVersion, 'crd.projectnet.org/v1');
  t.deepEqual(
    kindsOfPrefix(keys.networkPolicies).map(({ kind, restPrefix }) => [kind.kind, restPrefix]),
    [['NetworkPolicy', '']],
  );
  t.deepEqual(
    kindsOfPrefix(`${keys.networkPolicies}shop/`).map(({ kind, restPrefix }) => [kind.kind, restPrefix]),
    [['NetworkPolicy', 'shop/']],
  );
});
