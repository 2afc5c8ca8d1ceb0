// The CNI environment variables, validated per command (CNI spec "Parameters"; libcni's skel).
import { CniError, ErrorCode, quote } from './errors.ts';
import { parseCniArgs, type CniArgs } from './args.ts';
import { interfaceNameProblem, MAX_IFNAME_BYTES } from './interface-name.ts';

const COMMANDS = ['ADD', 'DEL', 'CHECK', 'VERSION', 'STATUS', 'GC'] as const;
export type Command = (typeof COMMANDS)[number];

/** What each command needs from the environment (as skel requires). */
const REQUIRED: Record<Command, readonly string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  GC: ['CNI_PATH'],
  STATUS: ['CNI_PATH'],
  VERSION: [],
};

const CONTAINER_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

export interface CniEnvironment {
  command: Command;
  containerId: string;
  /** Empty when the runtime has no namespace any more (DEL after the sandbox is gone). */
  netns: string;
  ifname: string;
  /** Directories searched for delegated plugins, in order. */
  path: string[];
  args: CniArgs;
  /** The raw variables, passed on to delegated plugins. */
  raw: Readonly<Record<string, string | undefined>>;
}

/** `undefined` when CNI_COMMAND is unset: the binary was run by hand, not by a runtime. */
export function readCommand(env: Readonly<Record<string, string | undefined>>): Command | undefined {
  const command = env['CNI_COMMAND'];
  if (command === undefined || command === '') return undefined;
  if (!(COMMANDS as readonly string[]).includes(command)) {
    throw new CniError(ErrorCode.InvalidEnvironment, `CNI_COMMAND ${quote(command)} is not one of ${COMMANDS.join(', ')}`);
  }
  return command as Command;
}

export function parseEnvironment(command: Command, env: Readonly<Record<string, string | undefined>>): CniEnvironment {
  const missing = REQUIRED[command].filter((name) => !env[name]);
  if (missing.length > 0) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `${command} needs ${missing.join(', ')}, which ${missing.length > 1 ? 'are' : 'is'} not set`,
    );
  }
  const containerId = env['CNI_CONTAINERID'] ?? '';
  if (containerId && !CONTAINER_ID.test(containerId)) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `CNI_CONTAINERID ${quote(containerId)} is invalid: it must start with a letter or digit, followed by letters, digits, '_', '.' or '-'`,
    );
  }
  const ifname = env['CNI_IFNAME'] ?? '';
  if (REQUIRED[command].includes('CNI_IFNAME')) validateIfname(ifname);
  return {
    command,
    containerId,
    netns: env['CNI_NETNS'] ?? '',
    ifname,
    path: (env['CNI_PATH'] ?? '').split(':').filter(Boolean),
    args: parseCniArgs(env['CNI_ARGS']),
    raw: env,
  };
}

/** The kernel's rules for interface names (dev_valid_name), as libcni's ValidateInterfaceName. */
function validateIfname(name: string): void {
  const problem =
    Buffer.byteLength(name) > MAX_IFNAME_BYTES
      ? `is ${Buffer.byteLength(name)} bytes long; at most ${MAX_IFNAME_BYTES} are allowed`
      : interfaceNameProblem(name);
  if (problem) throw new CniError(ErrorCode.InvalidEnvironment, `CNI_IFNAME ${quote(name)} ${problem}`);
}
