// Follows the ConfigMap NETPLUG_CONFIG_MAP (its key NETPLUG_CONFIG_MAP_KEY) while the installer runs: every change of its template
// rewrites the conflist (a bad template is logged and the current conflist kept). Kept by an
// informer (runtime/informers.ts), narrowed by name (fieldSelector metadata.name, so RBAC can name
// the one ConfigMap): listed, then watched from that version, watched again where it left off when
// the watch ends quietly, and listed again after a failure, which also catches changes missed.
import type * as k8s from '@kubernetes/client-node';

import { aborted } from '../runtime/clock.ts';
import { describeError } from '../runtime/errors.ts';
import { Informers } from '../runtime/informers.ts';
import type { Log } from '../runtime/log.ts';
import { templateFromConfigMap } from './choose-template.ts';
import type { KubeAccess } from './open-kube-access.ts';
import type { Template } from './render-conflist.ts';

export async function watchConfigMap(
  kube: KubeAccess,
  name: string,
  key: string,
  onTemplate: (template: Template) => Promise<void>,
  log: Log,
  signal: AbortSignal,
  informers: { watchTimeoutMs?: number } = {},
): Promise<void> {
  const fieldSelector = `metadata.name=${name}`;
  const where = `ConfigMap ${kube.namespace}/${name}`;
  // Changes are applied one at a time, in order.
  let applying = Promise.resolve();
  const apply = (configMap: k8s.V1ConfigMap) => {
    const template = templateFromConfigMap(configMap, key);
    if (!template) log.warning(`${where} has no ${key}: keeping the current conflist`);
    else
      applying = applying
        .then(() => onTemplate(template))
        .catch((err: unknown) => log.error(`${describeError(err)}: keeping the current conflist`));
  };
  // That it watches is news only when debugging; a failing watch is always worth a line.
  const watching = new Informers(kube.config, {
    ...informers,
    log: { info: (message) => log.debug(message), warning: (message) => log.warning(message) },
  });
  watching
    .informer<k8s.V1ConfigMap>({
      what: where,
      path: `/api/v1/namespaces/${kube.namespace}/configmaps`,
      list: () => kube.core.listNamespacedConfigMap({ namespace: kube.namespace, fieldSelector }),
      fieldSelector,
    })
    .addHandler({
      add: apply,
      update: (configMap) => apply(configMap),
      delete: () => log.warning(`${where} was deleted: keeping the current conflist`),
    });
  watching.start();
  await aborted(signal);
  await watching.stop();
  await applying;
}
