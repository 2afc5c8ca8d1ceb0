// A cache of one kind of Kubernetes object, kept by an informer (list, then watch). The library's
// informer stops on an error (the API unreachable, a watch refused): it is started again here with
// a growing delay. `synced` says the cache holds a complete list: a controller acts on what is
// absent from it only then, and still confirms with a fresh GET before it does.
// Used by the long-running programs only (netplug-kube-controllers, netplug-node's routes, pods
// and Node, netplug-install's ConfigMap, netplug-operator): the plugin's own Kubernetes client
// (client.ts) loads none of @kubernetes/client-node.
import * as k8s from '@kubernetes/client-node';

export interface WatchLog {
  info(message: string): void;
  warning(message: string): void;
}

/** An API answer's status and message (the client's own message holds the whole body and headers, over lines). */
export function describeApiError(err: unknown): string {
  if (!(err instanceof k8s.ApiException)) return err instanceof Error ? err.message : String(err);
  try {
    const status = JSON.parse(String(err.body)) as { message?: unknown };
    if (typeof status.message === 'string') return `${err.code} ${status.message}`;
  } catch {
    // not a Status: the code says enough
  }
  return `HTTP ${err.code}`;
}

export interface WatchedObjects<T extends k8s.KubernetesObject> {
  get(name: string, namespace?: string): T | undefined;
  list(): readonly T[];
  /** Whether the cache was filled by a complete list and the watch has not failed since. */
  synced(): boolean;
  stop(): Promise<void>;
}

const FIRST_RETRY_MS = 500;
const LAST_RETRY_MS = 30_000;

export function watchObjects<T extends k8s.KubernetesObject>(
  config: k8s.KubeConfig,
  what: string,
  path: string,
  list: () => Promise<k8s.KubernetesListObject<T>>,
  on: { synced?: () => void; event?: (verb: 'add' | 'update' | 'delete', object: T) => void; failed?: (err: Error) => void },
  log: WatchLog,
  labelSelector?: string,
  fieldSelector?: string,
): WatchedObjects<T> {
  // makeInformer's own ListWatch, which takes a field selector too (the pods of one node).
  const informer = new k8s.ListWatch(path, new k8s.Watch(config), list, false, labelSelector, fieldSelector);
  let synced = false;
  let stopped = false;
  let failed = false;
  let delay = FIRST_RETRY_MS;
  let retry: NodeJS.Timeout | undefined;

  const start = () => {
    failed = false;
    informer.start().then(
      () => {
        if (failed || stopped) return;
        if (!synced) log.info(`watching ${what}`);
        synced = true;
        delay = FIRST_RETRY_MS;
        on.synced?.();
      },
      (err: unknown) => fail(err),
    );
  };
  const fail = (err: unknown) => {
    if (stopped || failed) return;
    failed = true;
    synced = false;
    on.failed?.(err instanceof Error ? err : new Error(String(err)));
    log.warning(`watching ${what} failed (${describeApiError(err)}); trying again in ${delay / 1000} s`);
    retry = setTimeout(start, delay);
    delay = Math.min(delay * 2, LAST_RETRY_MS);
  };
  informer.on('error', fail);
  const { event } = on;
  if (event) for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, (object) => event(verb, object));
  start();

  return {
    get: (name, namespace) => informer.get(name, namespace),
    list: () => informer.list(),
    synced: () => synced,
    async stop() {
      stopped = true;
      clearTimeout(retry);
      await informer.stop();
    },
  };
}

/** Whether a GET found the object (false for 404); other failures are thrown. */
export async function exists(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return true;
  } catch (err) {
    if ((err as { code?: unknown }).code === 404) return false;
    throw err;
  }
}
