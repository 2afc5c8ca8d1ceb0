// netplug-ipam as its own IPAM plugin executable. Its address management needs a datastore, which
// arrives with a later release; until then it answers VERSION and says so for every other command.
import type { MainIo, MainOutcome } from '../plugin/main.ts';
import { about, print } from '../plugin/main.ts';
import { readCommand } from '../cni/environment.ts';
import { CniError, ErrorCode } from '../cni/errors.ts';
import { LATEST_VERSION, SUPPORTED_VERSIONS } from '../cni/versions.ts';

export async function runIpamMain(io: MainIo): Promise<MainOutcome> {
  try {
    const command = readCommand(io.env);
    if (command === undefined) {
      io.stderr(about('netplug-ipam'));
      return { stdout: '', exitCode: 0 };
    }
    if (command === 'VERSION') return { stdout: print({ cniVersion: LATEST_VERSION, supportedVersions: SUPPORTED_VERSIONS }), exitCode: 0 };
    throw new CniError(
      ErrorCode.InvalidConfig,
      'netconf field "ipam.type" is "netplug-ipam", which needs its datastore and is not available in this release; use "host-local"',
    );
  } catch (err) {
    return { stdout: print((err as CniError).toJSON(LATEST_VERSION)), exitCode: 1 };
  }
}
