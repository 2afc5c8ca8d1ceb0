// netplugctl, the admin CLI: (arguments, environment) → (stdout, stderr, exit code).
import { NETPLUG_VERSION } from '../version.ts';

export interface CtlOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
}

const USAGE = `usage: netplugctl <command>

commands:
  version    print netplug's version
`;

export async function runCtlMain(argv: readonly string[]): Promise<CtlOutcome> {
  const [command] = argv;
  switch (command) {
    case 'version':
      return { stdout: `netplugctl ${NETPLUG_VERSION}\n`, stderr: '', exitCode: 0 };
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      return { stdout: USAGE, stderr: '', exitCode: command === undefined ? 2 : 0 };
    default:
      return { stdout: '', stderr: `netplugctl: unknown command "${command}"\n${USAGE}`, exitCode: 2 };
  }
}
