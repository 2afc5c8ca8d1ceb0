// Placeholder until this command group lands; see ts/ctl/cluster-main.ts for the contract.
import type { ClusterCommand } from '../ctl/cluster-command.ts';

export const runUpgradeCommand: ClusterCommand = async (_args, _env, io) => {
  io.err('netplugctl: this command is not available in this build\n');
  return 1;
};
