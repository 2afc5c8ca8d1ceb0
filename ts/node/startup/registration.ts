// On the etcd datastore, netplug's Node resource is what pool node selectors match: once start-up
// has registered the node (start-up.ts), this controller keeps its labels equal to the Kubernetes
// Node's. Level-triggered: a change of the Node's labels (nothing else of it) enqueues the node,
// whose reconcile reads the labels from the informer's cache and writes them if they differ (a
// failure is retried after a backoff). (On the Kubernetes datastore the Node objects themselves
// are read: nothing to register.)
import type * as k8s from '@kubernetes/client-node';

import { Controller, handlerFor } from '../../runtime/controller.ts';
import type { Informer } from '../../runtime/informers.ts';
import type { NodeParts } from '../shared/subsystem.ts';
import { registerNode } from './register-node.ts';

export function registrationController(parts: NodeParts, node: Informer<k8s.V1Node>): Controller {
  const { store, log, manager } = parts;
  const name = parts.settings.nodeName;
  const controller = new Controller({
    name: 'registration',
    log,
    metrics: manager.metrics,
    reconcile: async () => {
      const labels = node.get(name)?.metadata?.labels ?? {};
      const done = await registerNode(store, name, labels);
      if (done !== 'unchanged') log.info(`node "${name}" ${done} with labels ${JSON.stringify(labels)}`);
      return undefined;
    },
  });
  // A deletion is not passed on (the node controller of netplug-kube-controllers removes the
  // Node resource of a deleted Node): the Node's next version is.
  const { delete: _deleted, ...handler } = handlerFor(controller, () => name, { onSynced: [name] });
  node.addHandler(handler, { significant: (object) => object.metadata?.labels ?? {} });
  controller.enqueue(name);
  return controller;
}
