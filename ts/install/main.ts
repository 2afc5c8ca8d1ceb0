// netplug-install (to be built: issue 10).

/** Runs netplug-install until `signal` aborts; resolves to the exit code. */
export async function runInstallMain(_argv: readonly string[], _env: NodeJS.ProcessEnv, _signal: AbortSignal): Promise<number> {
  process.stderr.write('netplug-install: not built yet\n');
  return 1;
}
