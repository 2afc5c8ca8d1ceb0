// netplugctl's cluster commands: upgrade, migrate, datastore migrate and flows, dispatched here
// with the entry points, so that ts/ctl (which upgrade/ and migrate/ build on) never imports them. They run
// from the agents bundle (ts/cli/agents.ts) because they use @kubernetes/client-node, which the plugin's
// bundle, on every pod's path, must not parse. Each group parses its own flags.
import { type ClusterCommand, type ClusterCommandIo, commandStart } from '../ctl/cluster-command.ts';

const GROUPS: Record<string, { usage: string; load: () => Promise<ClusterCommand> }> = {
  upgrade: {
    usage: "upgrade plan|apply|status|rollback   upgrade the cluster to this netplugctl's release (netplugctl upgrade --help)",
    load: async () => (await import('../upgrade/command.ts')).runUpgradeCommand,
  },
  'migrate owner-references': {
    usage: 'migrate owner-references --check|--strip|--restore   owner references to netplug resources across an upgrade',
    load: async () => (await import('../migrate/owner-references-command.ts')).runOwnerReferencesCommand,
  },
  'migrate auto-host-endpoints': {
    usage: 'migrate auto-host-endpoints   move all-interfaces host endpoints to automatic ones',
    load: async () => (await import('../migrate/auto-host-endpoints-command.ts')).runAutoHostEndpointsCommand,
  },
  'migrate host-local': {
    usage: 'migrate host-local [--dry-run]   the host-local extra steps: USE_POD_CIDR=true, upgrade-ipam removed',
    load: async () => (await import('../migrate/host-local-command.ts')).runHostLocalCommand,
  },
  'datastore migrate': {
    usage: "datastore migrate export|import|lock|unlock   move netplug's data from etcd to the Kubernetes datastore",
    load: async () => (await import('../migrate/datastore-command.ts')).runDatastoreMigrateCommand,
  },
  flows: {
    usage: 'flows [--namespace NS] [--pod [NS/]NAME] [--policy NAME] [--action Allow|Deny] [--follow]   the flow logs netplug-flows holds',
    load: async () => (await import('../flows/command.ts')).runFlowsCommand,
  },
};

const CLUSTER_USAGE = Object.values(GROUPS)
  .map((group) => `  ${group.usage}`)
  .join('\n');

/**
 * Runs a cluster command: `args` are netplugctl's arguments as given. The group is named by the
 * command's first words, and the remaining arguments (flags included, in order) go to the group's
 * own parser.
 */
export async function runClusterCtlMain(args: readonly string[], env: NodeJS.ProcessEnv, io: ClusterCommandIo): Promise<number> {
  // The group's words start the command (after the global flags and their values).
  const start = commandStart(args);
  const words = start < 0 ? [] : args.slice(start).filter((arg) => !arg.startsWith('-'));
  const name = Object.keys(GROUPS).find((group) => group.split(' ').every((word, i) => words[i] === word));
  if (!name) {
    io.err(`netplugctl: unknown command "${words.slice(0, 2).join(' ')}"; one of:\n${CLUSTER_USAGE}\n`);
    return 2;
  }
  // Drop the group's words (their first occurrences from the start), keep everything else in order.
  const rest = [...args];
  for (const word of name.split(' ')) rest.splice(rest.indexOf(word, start), 1);
  const command = await (GROUPS[name] as (typeof GROUPS)[string]).load();
  try {
    return await command(rest, env, io);
  } catch (err) {
    io.err(`netplugctl: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
