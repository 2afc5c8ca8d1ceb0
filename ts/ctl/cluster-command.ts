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
 * with one of them among its arguments to the agents bundle; kept here, free of imports, so that
 * the plugin's bundle can name them without taking in their code.
 */
export const CLUSTER_COMMANDS = ['upgrade', 'migrate', 'datastore'] as const;
