// What the viewer tests share: a real kube-apiserver for TokenReviews, the built netplug-flows
// taking records from a node's service account and reads from the viewer's, and the built
// netplug-flow-viewer reading it with the viewer's token from a file, each a process stopped
// (and awaited) after the file, with its log for a failure's context.
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type * as k8s from '@kubernetes/client-node';

import { ExitedWhileStarting, onFreshPorts } from '../../scripts/lib/fresh-ports.ts';
import type { FlowRecord } from '../../ts/model/flow.ts';
import { ROOT, requireBuilt, tempDir } from '../helpers/cni.ts';
import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { startKube } from '../helpers/kube.ts';
import type { Teardowns } from '../helpers/shared.ts';

const NETPLUG_FLOWS = join(ROOT, 'dist/bin/netplug-flows');
export const NETPLUG_FLOW_VIEWER = join(ROOT, 'dist/bin/netplug-flow-viewer');
const AGGREGATOR_RULES: k8s.V1PolicyRule[] = [{ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] }];

export interface Started {
  /** Where it serves, and its health server. */
  readonly url: string;
  readonly health: string;
  log: () => string;
}

export interface ViewerCluster {
  /** A scratch directory removed after the file. */
  dir: string;
  tokens: { node: string; viewer: string };
  flows: Started;
  viewer: Started;
  /** Posts records to netplug-flows as netplug-node does. */
  post(records: FlowRecord[]): Promise<void>;
  /** Starts the built viewer with `env` over the defaults; stopped after the file. */
  startViewer(env: Record<string, string>): Promise<Started>;
}

/** What a program is started with: its environment and where it serves, on ports picked for the attempt. */
interface Launch {
  env: Record<string, string>;
  url: string;
  health: string;
}

/**
 * Starts the built `program` as `launch` makes it; ready once its health server's /readyz answers
 * 200. freePort() only finds a port free at that moment: a program that exits because another
 * process took one (EADDRINUSE) is started again on new ports; one that exits otherwise fails at once.
 */
function startProgram(shared: Teardowns, program: string, launch: () => Promise<Launch>): Promise<Started> {
  return onFreshPorts(async () => {
    const { env, url, health } = await launch();
    const child: ChildProcess = spawn(program, [], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    let gone = false;
    // 'close': exited, and its stderr read to the end (the reason it exited is in the log).
    const exited = new Promise<void>((resolve) =>
      child.once('close', () => {
        gone = true;
        resolve();
      }),
    );
    shared.teardown(async () => {
      child.kill('SIGTERM');
      await exited;
    });
    const outcome = await eventually(
      `${program} serves`,
      async () => (gone ? 'exited' : (await fetch(`${health}/readyz`)).status === 200 ? 'ready' : undefined),
      { context: () => log, timeoutMs: 60_000 },
    );
    if (outcome === 'ready') return { url, health, log: () => log };
    const failure = `${program} exited before serving:\n${log}`;
    throw /EADDRINUSE/.test(log) ? new ExitedWhileStarting(failure) : new Error(failure);
  });
}

export async function startViewerCluster(shared: Teardowns): Promise<ViewerCluster> {
  requireBuilt();
  const kube = await startKube(shared);
  const kubeconfig = (await kube.identityWith('netplug-flows-viewer-test', AGGREGATOR_RULES)).kubeconfig;
  const namespace = `viewer-sa-${process.pid}`;
  await kube.core.createNamespace({ body: { metadata: { name: namespace } } });
  const tokens = { node: '', viewer: '' };
  for (const name of ['node', 'viewer'] as const) {
    await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
    const issued = await kube.core.createNamespacedServiceAccountToken({
      name,
      namespace,
      body: { spec: { audiences: ['netplug-flows'], expirationSeconds: 3600 } },
    });
    tokens[name] = issued.status?.token ?? '';
  }
  const dir = tempDir(shared, 'viewer');
  const tokenFile = join(dir, 'viewer-token');
  writeFileSync(tokenFile, tokens.viewer, { mode: 0o600 });

  const flows = await startProgram(shared, NETPLUG_FLOWS, async () => {
    const [write, read, health] = [await freePort(), await freePort(), await freePort()];
    return {
      env: {
        KUBECONFIG: kubeconfig,
        NETPLUG_FLOWS_LISTEN: `127.0.0.1:${write}`,
        NETPLUG_FLOWS_READ_LISTEN: `127.0.0.1:${read}`,
        NETPLUG_FLOWS_HEALTH_ADDR: `127.0.0.1:${health}`,
        NETPLUG_FLOWS_WRITERS: `${namespace}:node`,
        NETPLUG_FLOWS_READERS: `${namespace}:viewer`,
      },
      url: `http://127.0.0.1:${write}`,
      health: `http://127.0.0.1:${health}`,
    };
  });

  const startViewer = (env: Record<string, string>) =>
    startProgram(shared, NETPLUG_FLOW_VIEWER, async () => {
      const [port, health] = [await freePort(), await freePort()];
      return {
        env: {
          NETPLUG_VIEWER_LISTEN: `127.0.0.1:${port}`,
          NETPLUG_VIEWER_HEALTH_ADDR: `127.0.0.1:${health}`,
          NETPLUG_VIEWER_FLOWS_URL: flows.url,
          NETPLUG_VIEWER_TOKEN_FILE: tokenFile,
          ...env,
        },
        url: `http://127.0.0.1:${port}`,
        health: `http://127.0.0.1:${health}`,
      };
    });
  const viewer = await startViewer({});

  const post = async (records: FlowRecord[]) => {
    const answer = await fetch(`${flows.url}/v1/flows`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokens.node}` },
      body: JSON.stringify({ records }),
    });
    if (answer.status !== 200) throw new Error(`posting records: ${answer.status} ${await answer.text()}`);
  };
  return { dir, tokens, flows, viewer, post, startViewer };
}
