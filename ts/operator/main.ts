// netplug-operator (to be built: issue 11).

/** Runs netplug-operator until `signal` aborts; resolves to the exit code. */
export async function runOperatorMain(_argv: readonly string[], _env: NodeJS.ProcessEnv, _signal: AbortSignal): Promise<number> {
  process.stderr.write('netplug-operator: not built yet\n');
  return 1;
}
