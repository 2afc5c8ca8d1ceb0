// The CNI service: netplug-node serving the CNI protocol to the `netplug` shim on its socket
// (serve-cni.ts) with FAST_PATH true, lent the agent's warm services (cni-services.ts: its
// datastore connections, counted as the agent's, and its watch of this node's pods,
// watch-pods.ts). A failure to serve leaves runtimes the one-shot plugin, so the agent goes on:
// serving is no reason for the node not to be ready, but a setting that keeps it from serving
// calls is (readiness `cni`, decline-log.ts). Other subsystems join in a call through the hooks
// main gives, which the plugin's core calls as services of its host (`workloadPlanned`, `workloadNetworked`). Metrics: cni-metrics.ts. With NETPLUG_CNI_TIMINGS_FILE, each
// served call's timings are appended there (call-timings.ts).
import { appendFileSync } from 'node:fs';

import type { Logger } from '../../log/logger.ts';
import { aborted } from '../../runtime/clock.ts';
import { describeError } from '../../runtime/errors.ts';
import type { NodeParts, Subsystem } from '../shared/subsystem.ts';
import type { PluginServices } from '../../plugin/services.ts';
import type { CallTimings } from './call-timings.ts';
import { CniMetrics } from './cni-metrics.ts';
import { openAgentServices } from './cni-services.ts';
import { serveCni } from './serve-cni.ts';
import { watchPods } from './watch-pods.ts';

/** Other subsystems' part in the calls served (main gives them; the CNI service knows none of them). */
type CallHooks = Pick<PluginServices, 'workloadNetworked' | 'workloadPlanned'>;

export function cniService(parts: NodeParts, hooks: CallHooks = {}): Subsystem {
  const { settings, env, informers, kube, manager } = parts;
  const log = parts.log.child('cni');
  const metrics = new CniMetrics(manager.metrics.registry);
  let server: Awaited<ReturnType<typeof serveCni>> | undefined;
  manager.health.add('cni', () => server?.notReady());
  return {
    async run(signal) {
      if (!settings.fastPath) {
        parts.log.info('FAST_PATH is false: CNI is not served here; runtimes run the one-shot plugin');
        return;
      }
      const pods = watchPods(informers, kube, settings.nodeName);
      metrics.countWatchedPodsWith(() => pods.count());
      let services: Awaited<ReturnType<typeof openAgentServices>> | undefined;
      try {
        services = await openAgentServices(settings, env, {
          wrapStore: parts.countStore,
          servedTogether: (count) => metrics.countServedTogether(count),
          watchedPod: (namespace, name, uid) => {
            const found = pods.read(namespace, name, uid);
            metrics.countPodRead(found ? 'watch' : 'api');
            return found;
          },
          watched: parts.watchedIpam,
        });
        server = await serveCni({
          socketPath: settings.agentSocket,
          services: { ...services.services, ...hooks },
          log,
          env,
          signal,
          observe: (command, result, seconds) => metrics.observeCni(command, result, seconds),
          declined: (kind) => metrics.countDeclined(kind),
          ...(settings.cniTimingsFile ? { timings: appendTimings(settings.cniTimingsFile, log) } : {}),
        });
      } catch (err) {
        log.error(`cannot serve CNI on ${settings.agentSocket}: ${describeError(err)}; runtimes run the one-shot plugin`);
      }
      await aborted(signal);
      await server?.stop();
      services?.close();
    },
  };
}

/** Appends each call's timings to `file`, a JSON object a line; a failure is logged once. */
function appendTimings(file: string, log: Logger): (timings: CallTimings) => void {
  let failed = false;
  return (timings) => {
    try {
      appendFileSync(file, `${JSON.stringify(timings)}\n`);
    } catch (err) {
      if (!failed) log.warning(`cannot write the CNI timings to ${file}: ${describeError(err)}`);
      failed = true;
    }
  };
}
