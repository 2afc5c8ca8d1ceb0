// Entry point of the bundled executables: dispatches on the name the program was run as.
import { processIo, programName } from './process-io.ts';

async function main(): Promise<void> {
  const program = programName();
  if (program === 'netplugctl') {
    const { runCtlMain } = await import('../ctl/main.ts');
    const outcome = await runCtlMain(process.argv.slice(2));
    process.stdout.write(outcome.stdout);
    process.stderr.write(outcome.stderr);
    process.exitCode = outcome.exitCode;
    return;
  }
  const run = program === 'netplug-ipam' ? (await import('../ipam/main.ts')).runIpamMain : (await import('../plugin/main.ts')).runMain;
  const outcome = await run(processIo());
  process.stdout.write(outcome.stdout);
  process.exitCode = outcome.exitCode;
}

main().catch((err: unknown) => {
  // The commands report their own failures; this is the last resort for a broken build (a
  // missing addon, say): still a CNI error object, never a stack trace.
  const msg = `internal error: ${err instanceof Error ? err.message : String(err)}`;
  process.stdout.write(`${JSON.stringify({ cniVersion: '1.1.0', code: 999, msg }, null, 4)}\n`);
  process.exitCode = 1;
});
