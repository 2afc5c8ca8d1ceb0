// netplug-node serves the CNI protocol to the `netplug` shim on a unix socket (root only): the
// shim sends its environment and stdin, and the pod's network namespace beside them (a
// descriptor: the agent needs no view of the host's namespace mounts), the agent accepts or
// declines, the shim says go, and the agent runs the very core the one-shot plugin runs (runMain),
// lent the agent's warm services, and returns the exit code, stdout and stderr. A declined
// request, or an agent that is not there, leaves the shim to run the one-shot: nothing is ever
// lost by declining. The socket's transport is in ts/host/cni-socket.ts, the framing after the
// request in cni-frames.ts; what is declined in decline.ts (and logged, counted, reported by
// decline-log.ts); the journal of unfinished ADDs in inflight-journal.ts, their roll-back in
// roll-back.ts.
import { chmodSync, closeSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { lendNetns, type NetnsLoan } from '../../dataplane/index.ts';
import { monotonicMs } from '../../dataplane/timing.ts';
import { listenCni, type CniListener, type ReceivedRequest } from '../../host/cni-socket.ts';
import { lockHost, type HostLock } from '../../host/lock.ts';
import { retry } from '../../runtime/backoff.ts';
import type { Logger } from '../../log/logger.ts';
import type { PluginServices } from '../../plugin/services.ts';
import { CallTrace, type CallTimings } from './call-timings.ts';
import { ACCEPT, DECLINE, frame, FrameReader, GO } from './cni-frames.ts';
import { declineReason, parseRequest, type CniRequest, type Decline, type DeclineKind } from './decline.ts';
import { DeclineLog } from './decline-log.ts';
import { InflightJournal } from './inflight-journal.ts';
import { NamespaceTails } from './namespace-tails.ts';
import { rollBack, runCommand } from './roll-back.ts';

/** How long a connection may take to send its request, and then its go. */
const REQUEST_PATIENCE_MS = 10_000;

export interface CniServerOptions {
  socketPath: string;
  services: PluginServices;
  log: Logger;
  /** The agent's own environment (the proxy settings its clients follow). */
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  /** Each served command's result and duration (metrics). */
  observe?: (command: string, result: 'success' | 'error', seconds: number) => void;
  /** Each declined request's kind (metrics). */
  declined?: (kind: DeclineKind) => void;
  /** Each served command's timings (call-timings.ts); not timed without it. */
  timings?: (timings: CallTimings) => void;
  /** Where the plugin's log lines of roll-backs go (the agent's stderr). */
  echo?: (text: string) => void;
}

export interface CniServer {
  /** Commands served, by CNI_COMMAND (VERSION and none included), and requests declined. */
  readonly counts: { served: Record<string, number>; declined: number };
  /** Why requests are declined now, if they are whatever they ask. */
  notServing(): string | undefined;
  /** Why the agent is not ready: a setting that keeps the agent from serving calls (DeclineLog). */
  notReady(): string | undefined;
  /** Declines new requests, waits for those running, removes the socket. */
  stop(): Promise<void>;
}

export async function serveCni(options: CniServerOptions): Promise<CniServer> {
  const { socketPath, log, signal } = options;
  // Kernel work a command answered before (a DEL's veth deletion, after its routes and addresses
  // are gone): stop() waits for it, and its failure is logged here, the command's log being closed.
  const lingering = new Set<Promise<unknown>>();
  const services: PluginServices = {
    ...options.services,
    lingering: (work, what) => {
      const tracked = work.then(
        () => undefined,
        (err: unknown) => log.error(`${what}: ${(err as Error).message}`),
      );
      lingering.add(tracked);
      void tracked.finally(() => lingering.delete(tracked));
    },
  };
  const dir = dirname(socketPath);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const journal = new InflightJournal(join(dir, 'inflight'));
  const counts = { served: {} as Record<string, number>, declined: 0 };
  let state: 'waiting' | 'rolling back' | 'serving' | 'stopping' = 'waiting';
  const notServing = () =>
    ({
      waiting: 'netplug-node is starting',
      'rolling back': 'netplug-node is rolling back unfinished ADDs',
      serving: undefined,
      stopping: 'netplug-node is stopping',
    })[state];
  const stateDecline = (): Decline | undefined => {
    const reason = notServing();
    if (reason === undefined) return undefined;
    return { kind: state === 'stopping' ? 'stopping' : state === 'waiting' ? 'starting' : 'rolling-back', reason };
  };
  const running = new Set<Promise<void>>();
  const tails = new NamespaceTails();
  const declines = new DeclineLog(log, options.declined);

  const serve = async (received: ReceivedRequest): Promise<void> => {
    const trace = options.timings && new CallTrace(received.acceptedAt);
    const { socket, stdin } = received;
    socket.on('error', () => undefined); // a shim that went away; its own fallback covers it
    const reader = new FrameReader(socket);
    socket.setTimeout(REQUEST_PATIENCE_MS, () => socket.destroy());
    let request: CniRequest;
    let entry: string | undefined;
    // The namespace the shim sent, lent to the path the runtime named it by while the call runs.
    let loan: NetnsLoan | undefined;
    try {
      const parsed = parseRequest(received.header);
      let decline: Decline | undefined = typeof parsed === 'string' ? { kind: 'malformed', reason: parsed } : stateDecline();
      request = parsed as CniRequest;
      if (received.netns !== undefined) {
        const netns = decline ? undefined : request.env['CNI_NETNS'];
        if (netns) {
          loan = lendNetns(netns, received.netns);
          if (!loan)
            decline = { kind: 'netns-in-use', reason: `CNI_NETNS ${netns} names another namespace than a call in progress for that path` };
        } else closeSync(received.netns);
      }
      decline ??= declineReason(request, stdin, options.env, loan !== undefined);
      // An ADD is journaled before it is accepted: an agent that cannot journal it declines it.
      if (decline === undefined && request.env['CNI_COMMAND'] === 'ADD') {
        try {
          entry = journal.record({ env: request.env, stdin, program: request.program, pid: request.pid });
        } catch (err) {
          decline = { kind: 'journal', reason: `the journal of unfinished ADDs cannot be written: ${(err as Error).message}` };
        }
      }
      if (decline !== undefined) {
        counts.declined++;
        declines.note(decline);
        loan?.release();
        socket.end(Buffer.from([DECLINE]));
        return;
      }
      socket.write(Buffer.from([ACCEPT]));
      // Nothing starts before go: a shim that gave up meanwhile runs the one-shot itself.
      if ((await reader.byte()) !== GO) throw new Error('not go');
      if (trace) trace.go = monotonicMs();
    } catch {
      if (entry) journal.remove(entry);
      loan?.release();
      socket.destroy();
      return;
    }
    socket.setTimeout(0);
    const command = request.env['CNI_COMMAND'] ?? '';
    const netnsPath = request.env['CNI_NETNS'];
    await tails.pending(netnsPath);
    const started = performance.now();
    let stderr = '';
    // The kernel work the call hands over (a pod's DEL: the veth's deletion): the namespace stays
    // lent until it ends, and the next call on the namespace waits for it.
    const kernelWork: Promise<unknown>[] = [];
    const callServices: PluginServices = {
      ...services,
      lingering: (work, what) => {
        kernelWork.push(work);
        services.lingering?.(work, what);
      },
    };
    const served = () =>
      runCommand(
        { env: request.env, readStdin: () => stdin, stderr: (text) => (stderr += text), pid: request.pid },
        request.program,
        trace ? { ...callServices, store: (conf) => callServices.store?.(conf)?.then((store) => trace.timedStore(store)) } : callServices,
      );
    const outcome = await (trace ? trace.run(served) : served());
    tails.add(netnsPath, kernelWork);
    if (loan) {
      const lent = loan;
      void Promise.allSettled(kernelWork).then(() => lent.release());
    }
    // Removed before the result is sent: an agent killed after this point leaves no entry, and its
    // shim, without a result, reports an ADD failure (the runtime then runs DEL).
    if (entry) journal.remove(entry);
    counts.served[command || 'none'] = (counts.served[command || 'none'] ?? 0) + 1;
    if (command === 'ADD' || command === 'DEL' || command === 'CHECK')
      options.observe?.(command, outcome.exitCode === 0 ? 'success' : 'error', (performance.now() - started) / 1000);
    const answered = trace && monotonicMs();
    socket.end(Buffer.concat([frame(JSON.stringify({ exitCode: outcome.exitCode })), frame(outcome.stdout), frame(stderr)]));
    if (trace && answered) options.timings?.(trace.answered(command, request.env['CNI_CONTAINERID'] ?? '', answered));
  };

  const track = (served: Promise<void>) => {
    const handled = served.catch((err: unknown) => log.error(`serving a CNI request: ${(err as Error).message}`));
    running.add(handled);
    void handled.finally(() => running.delete(handled));
  };
  // Started in the background: the agent's other work does not wait for the socket.
  let lock: HostLock | undefined;
  let listener: CniListener | undefined;
  let closed: Promise<void> = Promise.resolve();
  const starting = (async () => {
    lock = await ownSocket(join(dir, 'agent.lock'), signal, log);
    if (!lock) return;
    // A socket left by a previous run refuses connections: remove it, or listening fails.
    rmSync(socketPath, { force: true });
    let whenClosed = () => {};
    closed = new Promise((resolve) => (whenClosed = resolve));
    listener = listenCni(socketPath, REQUEST_PATIENCE_MS, (request) => track(serve(request)), whenClosed);
    chmodSync(socketPath, 0o600);
    log.info(`serving CNI on ${socketPath}`);
    state = 'rolling back';
    await rollBack(journal, { ...options, services });
    if (state === 'rolling back') state = 'serving';
  })().catch((err: unknown) => log.error(`cannot serve CNI on ${socketPath}: ${(err as Error).message}; runtimes run the one-shot plugin`));

  return {
    counts,
    notServing,
    notReady: () => declines.notReady(),
    stop: async () => {
      state = 'stopping';
      await starting;
      await Promise.allSettled([...running]);
      await Promise.allSettled([...lingering]);
      if (listener) {
        listener.close();
        await closed;
        await Promise.allSettled([...running]);
        rmSync(socketPath, { force: true });
      }
      journal.close();
      lock?.release();
      const served = Object.values(counts.served).reduce((a, b) => a + b, 0);
      log.info(`stopped serving CNI: ${served} commands served, ${counts.declined} requests declined${declines.summary()}`);
    },
  };
}

/**
 * The socket's directory for this agent alone (an flock held while it runs; the kernel releases it
 * if the agent dies): during a rolling update two agents may run on a node, and the new one must
 * neither take the socket nor roll back ADDs the old one is still serving. Undefined if the agent
 * stops first.
 */
async function ownSocket(path: string, signal: AbortSignal, log: Logger): Promise<HostLock | undefined> {
  let told = false;
  return retry(
    async () => {
      const lock = await lockHost(path, 1_000);
      if (lock) return lock;
      if (!told) log.info(`another netplug-node holds ${path}: serving CNI once it stops`);
      told = true;
      throw new Error(`${path} is held`);
    },
    // A lock that cannot be taken at all (not only held) fails at once: do not spin.
    { signal, backoff: { initialMs: 250, maxMs: 1_000, jitter: 0.1 } },
  );
}
