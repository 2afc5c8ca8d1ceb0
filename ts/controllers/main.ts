// netplug-kube-controllers (to be built: issue 10).

/** Runs netplug-kube-controllers until `signal` aborts; resolves to the exit code. */
export async function runControllersMain(_argv: readonly string[], _env: NodeJS.ProcessEnv, _signal: AbortSignal): Promise<number> {
  process.stderr.write('netplug-kube-controllers: not built yet\n');
  return 1;
}
