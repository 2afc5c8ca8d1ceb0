// Follows the ConfigMap NETPLUG_CONFIG_MAP (its key NETPLUG_CONFIG_MAP_KEY) while the installer runs: every change of its template
// rewrites the conflist (a bad template is logged and the current conflist kept). One list + watch
// by name (fieldSelector metadata.name, so RBAC can name the one ConfigMap). A watch that heard
// nothing for a while (client-node ends it after 30 s) or that the API server closed is watched
// again from the last resourceVersion seen; after an error, list again after 5 s, which also
// catches changes missed in between.
import * as k8s from '@kubernetes/client-node';

import { templateFromConfigMap } from './choose-template.ts';
import type { Log } from './log.ts';
import { isQuietEnd } from '../k8s/watch-objects.ts';
import { describeApiError, type KubeAccess } from './open-kube-access.ts';
import { pause } from './pause.ts';
import type { Template } from './render-conflist.ts';

const RETRY_MS = 5000;

export async function watchConfigMap(
  kube: KubeAccess,
  name: string,
  key: string,
  onTemplate: (template: Template) => Promise<void>,
  log: Log,
  signal: AbortSignal,
): Promise<void> {
  const fieldSelector = `metadata.name=${name}`;
  const where = `ConfigMap ${kube.namespace}/${name}`;
  // Changes are applied one at a time, in order.
  let applying = Promise.resolve();
  const apply = (configMap: k8s.V1ConfigMap) => {
    const template = templateFromConfigMap(configMap, key);
    if (!template) log('WARNING', `${where} has no ${key}: keeping the current conflist`);
    else
      applying = applying
        .then(() => onTemplate(template))
        .catch((err: unknown) => log('ERROR', `${(err as Error).message}: keeping the current conflist`));
  };
  do {
    try {
      const list = await kube.core.listNamespacedConfigMap({ namespace: kube.namespace, fieldSelector });
      const [configMap] = list.items;
      if (configMap) apply(configMap);
      let resourceVersion = list.metadata?.resourceVersion;
      for (;;) {
        const started = Date.now();
        await watchOnce(kube, fieldSelector, resourceVersion, signal, (phase, object) => {
          resourceVersion = object.metadata?.resourceVersion ?? resourceVersion;
          if (phase === 'ADDED' || phase === 'MODIFIED') apply(object);
          else if (phase === 'DELETED') log('WARNING', `${where} was deleted: keeping the current conflist`);
        });
        // Watched for a while: again at once. One ended as it began goes the slow way, or it would spin.
        if (signal.aborted || Date.now() - started < RETRY_MS) break;
      }
    } catch (err) {
      if (!signal.aborted) log('WARNING', `watching ${where}: ${describeApiError(err)}`);
    }
    await applying;
  } while (await pause(RETRY_MS, signal));
}

/**
 * One watch from `resourceVersion` until the server ends it, it hears nothing for a while, it
 * fails (rejects), or `signal` aborts. Bookmarks come to `onEvent` too, for their resourceVersion.
 */
async function watchOnce(
  kube: KubeAccess,
  fieldSelector: string,
  resourceVersion: string | undefined,
  signal: AbortSignal,
  onEvent: (phase: string, object: k8s.V1ConfigMap) => void,
): Promise<void> {
  if (signal.aborted) return;
  let finish: (err?: unknown) => void = () => {};
  const done = new Promise<void>((resolve, reject) => {
    finish = (err) => (err && !signal.aborted && !isQuietEnd(err) ? reject(err) : resolve());
  });
  const controller = await new k8s.Watch(kube.config).watch(
    `/api/v1/namespaces/${kube.namespace}/configmaps`,
    { fieldSelector, resourceVersion, allowWatchBookmarks: true },
    (phase, object) => {
      if (phase === 'ERROR') finish(new Error(`the watch ended: ${(object as { message?: string })?.message ?? 'an error event'}`));
      else onEvent(phase, object as k8s.V1ConfigMap);
    },
    (err) => finish(err),
  );
  const stop = () => controller.abort();
  signal.addEventListener('abort', stop, { once: true });
  try {
    await done;
  } finally {
    signal.removeEventListener('abort', stop);
    controller.abort();
  }
}
