// The netplug CNI plugin, and netplug-ipam as an IPAM plugin of its own, as a function:
// (environment, stdin) → (stdout, exit code). Nothing here touches `process`, so the same core can
// run inside a resident agent. Each command's code is loaded only when that command runs: VERSION,
// on every runtime's path, loads next to nothing.
import type { Command } from '../cni/environment.ts';
import { readCommand } from '../cni/environment.ts';
import { CniError, ErrorCode } from '../cni/errors.ts';
import { LATEST_VERSION, SUPPORTED_VERSIONS, versionAllows } from '../cni/versions.ts';
import type { Logger } from '../log/logger.ts';
import type { ParsedNetconf } from '../config/netconf.ts';
import type { PluginContext } from './context.ts';
import type { EarlyWork } from './early.ts';
import type { PluginServices } from './services.ts';
import { NETPLUG_VERSION } from '../version.ts';

export interface MainIo {
  env: Readonly<Record<string, string | undefined>>;
  /** Reads all of stdin; called only by commands that take a netconf. */
  readStdin(): Buffer;
  /** Where log lines go (the runtime captures a plugin's stderr). */
  stderr(text: string): void;
  pid: number;
}

export interface MainOutcome {
  stdout: string;
  exitCode: number;
}

/** JSON as libcni's PrintResult writes it. */
export const print = (value: unknown): string => `${JSON.stringify(value, null, 4)}\n`;

export function about(program: string): string {
  return `${program} ${NETPLUG_VERSION}: a CNI plugin run by container runtimes, not by hand\nCNI protocol versions supported: ${SUPPORTED_VERSIONS.join(', ')}\n`;
}

export type Program = 'netplug' | 'netplug-ipam';

/**
 * One command. `services` come from a resident host (netplug-node): its warm clients and IPAM
 * turns; without them (the one-shot executable) everything is opened for this command alone.
 */
export async function runMain(io: MainIo, program: Program = 'netplug', services?: PluginServices): Promise<MainOutcome> {
  let command: Command | undefined;
  try {
    command = readCommand(io.env);
  } catch (err) {
    return failed(err as CniError, LATEST_VERSION);
  }
  if (command === undefined) {
    io.stderr(about(program));
    return { stdout: '', exitCode: 0 };
  }
  if (command === 'VERSION') {
    return { stdout: print({ cniVersion: LATEST_VERSION, supportedVersions: SUPPORTED_VERSIONS }), exitCode: 0 };
  }
  const { Logger } = await import('../log/logger.ts');
  const log = new Logger(program, io.stderr, io.pid).always({ via: services?.via ?? 'one-shot' });
  let cniVersion: string = LATEST_VERSION;
  let context: { close(): void } | undefined;
  let early: EarlyWork = {};
  try {
    const { parseEnvironment } = await import('../cni/environment.ts');
    const env = parseEnvironment(command, io.env);
    // An ADD's first kernel read, what is at the interface's name, needs the environment alone: it
    // starts now, and runs while the netconf is validated (it changes nothing).
    if (program === 'netplug' && command === 'ADD') {
      try {
        early.presence = (await import('./early.ts')).startPresence(env);
      } catch {
        // A host interface name that cannot be made: startEarlyWork reports it, after the netconf's own errors.
      }
    }
    const stdin = io.readStdin();
    // The one reader of the netconf: nothing below, early work included, acts on unvalidated input.
    const { parseNetconf, declaredVersion } = await import('../config/netconf.ts');
    let netconf: ParsedNetconf;
    try {
      netconf = parseNetconf(stdin);
    } catch (err) {
      cniVersion = declaredVersion(stdin) ?? cniVersion;
      throw err;
    }
    const { conf } = netconf;
    if (netconf.json['cniVersion'] !== undefined) cniVersion = conf.cniVersion;
    log.configure(
      conf.log_level,
      conf.log_file_path
        ? {
            path: conf.log_file_path,
            maxBytes: conf.log_file_max_size * 1024 * 1024,
            maxAgeDays: conf.log_file_max_age,
            maxCount: conf.log_file_max_count,
          }
        : undefined,
      services?.logFile,
    );
    if (command !== 'ADD' && command !== 'DEL' && !versionAllows(conf.cniVersion, command)) {
      throw new CniError(
        ErrorCode.IncompatibleVersion,
        `netconf field "cniVersion" is "${conf.cniVersion}", which has no ${command}; it needs ${command === 'CHECK' ? '0.4.0' : '1.1.0'} or later`,
      );
    }
    if (program === 'netplug-ipam' && conf.ipam.type !== 'netplug-ipam') {
      throw new CniError(ErrorCode.InvalidConfig, `netconf field "ipam.type" is "${conf.ipam.type}"; netplug-ipam serves "netplug-ipam"`);
    }
    // Started before the rest of the command loads, which it overlaps.
    early = await (await import('./early.ts')).startEarlyWork(command, program, env, netconf, services, early.presence);
    log.debug(`${command} called`, { container: env.containerId, netns: env.netns, interface: env.ifname, args: env.raw['CNI_ARGS'] });
    const { createContext } = await import('./context.ts');
    const ctx = createContext(env, netconf, log.child(command.toLowerCase()), {
      writesEndpoint: program === 'netplug',
      ...(early.store ? { store: early.store } : {}),
      ...(early.prefetched ? { prefetched: early.prefetched } : {}),
      ...(early.podReads ? { podReads: early.podReads } : {}),
      ...(services ? { services } : {}),
    });
    context = ctx;
    if (program === 'netplug-ipam') return await runIpamCommand(command, ctx, conf.cniVersion);
    switch (command) {
      case 'ADD': {
        const [{ cmdAdd }, { formatResult }] = await Promise.all([import('./add.ts'), import('../cni/result.ts')]);
        return { stdout: print(formatResult(await cmdAdd(ctx, early.presence), conf.cniVersion)), exitCode: 0 };
      }
      case 'DEL':
        await (await import('./del.ts')).cmdDel(ctx, {
          teardown: early.teardown,
          routesGone: early.routesGone,
          lingering: services?.lingering?.bind(services),
        });
        break;
      case 'CHECK':
        await (await import('./check.ts')).cmdCheck(ctx);
        break;
      case 'GC':
        await (await import('./lifecycle.ts')).cmdGc(ctx);
        break;
      case 'STATUS':
        await (await import('./lifecycle.ts')).cmdStatus(ctx);
        break;
    }
    return { stdout: '', exitCode: 0 };
  } catch (err) {
    const { toCniError } = await import('./errors.ts');
    const error = toCniError(err, command);
    logFailure(log, command, error);
    return failed(error, cniVersion);
  } finally {
    // Connections early work opened that no context took over.
    if (!context) {
      early.store?.then(
        (store) => store.close(),
        () => undefined,
      );
      early.podReads?.kube?.then(
        (kube) => kube.close(),
        () => undefined,
      );
    }
    context?.close();
    // A resident host answers without waiting for the kernel (a DEL's veth deletion still under
    // way); it waits for it before it stops. The one-shot must not exit with a thread in the kernel.
    const settling = (await import('./early.ts')).settle(early);
    if (services?.lingering) services.lingering(settling, `${command} of container ${io.env['CNI_CONTAINERID'] ?? ''}: kernel work`);
    else await settling;
    log.close();
  }
}

/** netplug-ipam's commands: the address manager alone, its result as an IPAM plugin's. */
async function runIpamCommand(command: Exclude<Command, 'VERSION'>, ctx: PluginContext, version: string): Promise<MainOutcome> {
  if (command === 'ADD') {
    const { formatResult } = await import('../cni/result.ts');
    return { stdout: print(formatResult(await ctx.ipam.add(), version)), exitCode: 0 };
  }
  const run = { DEL: () => ctx.ipam.del(), CHECK: () => ctx.ipam.check(), GC: () => ctx.ipam.gc(), STATUS: () => ctx.ipam.status() }[
    command
  ];
  await run();
  return { stdout: '', exitCode: 0 };
}

function failed(error: CniError, cniVersion: string): MainOutcome {
  return { stdout: print(error.toJSON(cniVersion)), exitCode: 1 };
}

function logFailure(log: Logger, command: Command, error: CniError): void {
  log.error(`${command} failed: ${error.message}`, { code: error.code, ...(error.details ? { details: error.details } : {}) });
  // A stack is for bugs, not for bad input, and only when asked for.
  if (error.code === ErrorCode.Internal && error.cause instanceof Error) log.debug(error.cause.stack ?? String(error.cause));
}
