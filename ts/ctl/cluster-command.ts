// The contract of netplugctl's cluster command groups (ts/cli/cluster-commands.ts): arguments after
// the group's words, the environment, and writers for progress and results, which long-running
// commands (upgrade apply) use as they go. The result is the exit code: 0 done, 1 refused or
// failed (with one line on stderr saying why), 2 a usage mistake.
export interface ClusterCommandIo {
  out(text: string): void;
  err(text: string): void;
  /** Stops a long-running command (SIGINT, SIGTERM). */
  signal: AbortSignal;
}

export type ClusterCommand = (args: readonly string[], env: NodeJS.ProcessEnv, io: ClusterCommandIo) => Promise<number>;

/**
 * The first words of netplugctl's cluster commands. ts/cli/sea-main.ts routes a netplugctl run
 * whose command starts with one of them to the agents bundle; kept here, free of imports, so that
 * the plugin's bundle and the SEA's main script can name them without taking in their code.
 */
export const CLUSTER_COMMANDS = ['upgrade', 'migrate', 'datastore', 'flows'] as const;

/** The flags netplugctl takes before its command words whose value is the next argument (DATASTORE_FLAGS and -o). */
export const VALUED_GLOBAL_FLAGS: readonly string[] = [
  '--datastore-type',
  '--etcd-endpoints',
  '--etcd-discovery-srv',
  '--etcd-key-file',
  '--etcd-cert-file',
  '--etcd-ca-cert-file',
  '--kubeconfig',
  '--k8s-api-root',
  '--config',
  '--output',
  '-o',
];

/**
 * Where netplugctl's command words start: the first argument that is neither a flag nor the value
 * of a global flag before it (`--kubeconfig F datastore migrate lock`); -1 when there is none. A
 * word further on (a pool named `upgrade`) is a name, not a command.
 */
export function commandStart(args: readonly string[]): number {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('-')) return i;
    if (VALUED_GLOBAL_FLAGS.includes(arg)) i++;
  }
  return -1;
}

/** Whether netplugctl's arguments name one of its cluster commands. */
export function isClusterCommand(args: readonly string[]): boolean {
  const start = commandStart(args);
  return start >= 0 && (CLUSTER_COMMANDS as readonly string[]).includes(args[start] as string);
}
