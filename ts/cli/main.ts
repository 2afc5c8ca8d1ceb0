// The bundled executables' program: dispatches on the name it was run as.
import { NETPLUG_VERSION } from '../version.ts';
import { processIo, programName, writeAll } from './process-io.ts';

/** Runs the program named by how it was invoked; failures end as a CNI error object. */
export function main(): void {
  dispatch().catch((err: unknown) => {
    // The commands report their own failures; this is the last resort for a broken build (a
    // missing addon, say): still a CNI error object, never a stack trace.
    const msg = `internal error: ${err instanceof Error ? err.message : String(err)}`;
    writeAll(1, `${JSON.stringify({ cniVersion: '1.1.0', code: 999, msg }, null, 4)}\n`);
    process.exitCode = 1;
  });
}

async function dispatch(): Promise<void> {
  const program = programName();
  // Every executable answers --version alike (a runtime never passes arguments to a plugin).
  if (process.argv[2] === '--version') {
    writeAll(1, `${program} ${NETPLUG_VERSION}\n`);
    return;
  }
  if (program === 'netplugctl') {
    const { runCtlMain } = await import('../ctl/main.ts');
    const outcome = await runCtlMain(process.argv.slice(2), process.env);
    writeAll(1, outcome.stdout);
    writeAll(2, outcome.stderr);
    process.exitCode = outcome.exitCode;
    return;
  }
  if (program === 'netplug-install') {
    // Only its readiness probe comes here (ts/cli/sea-main.ts): it runs every few seconds on every node.
    const { runInstallCheck } = await import('../install/check-main.ts');
    process.exitCode = await runInstallCheck(process.argv.slice(2), process.env, (line) => writeAll(2, line));
    return;
  }
  const { runMain } = await import('../plugin/main.ts');
  const outcome = await runMain(processIo(), program === 'netplug-ipam' ? 'netplug-ipam' : 'netplug');
  writeAll(1, outcome.stdout);
  process.exitCode = outcome.exitCode;
}
