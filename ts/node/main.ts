// netplug-node (to be built: issue 10).

/** Runs netplug-node until `signal` aborts; resolves to the exit code. */
export async function runNodeMain(_argv: readonly string[], _env: NodeJS.ProcessEnv, _signal: AbortSignal): Promise<number> {
  process.stderr.write('netplug-node: not built yet\n');
  return 1;
}
