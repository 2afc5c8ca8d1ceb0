// A kubeconfig user's `exec` stanza, checked as client-go checks it before running anything: a
// known apiVersion (v1 or v1beta1; v1alpha1 is gone from client-go since 1.24), a command,
// string args, name/value env, and interactiveMode. netplug runs plugins without a terminal, so
// Never and IfAvailable both mean "not interactive" and Always cannot be honoured. v1 requires
// the mode to be written; v1beta1 defaults it to IfAvailable.

const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'] as const;

export interface ExecSettings {
  apiVersion: (typeof EXEC_API_VERSIONS)[number];
  command: string;
  args: string[];
  env: [string, string][];
  installHint?: string;
  provideClusterInfo: boolean;
}

/** `exec` checked; `fail` makes the error from a message about it (e.g. "exec.command is missing"). */
export function execSettings(exec: unknown, fail: (message: string) => Error): ExecSettings {
  if (!exec || typeof exec !== 'object' || Array.isArray(exec)) throw fail('exec is not a mapping');
  const { apiVersion, command, args, env, installHint, provideClusterInfo, interactiveMode } = exec as Record<string, unknown>;
  if (!EXEC_API_VERSIONS.includes(apiVersion as ExecSettings['apiVersion']))
    throw fail(
      `exec.apiVersion ${JSON.stringify(apiVersion ?? null).slice(0, 80)} is not supported; use ${EXEC_API_VERSIONS.join(' or ')}`,
    );
  if (typeof command !== 'string' || command === '') throw fail('exec.command is missing');
  if (args !== undefined && args !== null && (!Array.isArray(args) || !args.every((arg) => typeof arg === 'string')))
    throw fail('exec.args must be a list of strings');
  const pairs: [string, string][] = [];
  if (env !== undefined && env !== null) {
    if (!Array.isArray(env)) throw fail('exec.env must be a list of {name, value}');
    for (const entry of env as unknown[]) {
      const { name, value } = (entry ?? {}) as Record<string, unknown>;
      if (typeof name !== 'string' || name === '' || typeof value !== 'string')
        throw fail('exec.env must be a list of {name, value} with string values');
      pairs.push([name, value]);
    }
  }
  const mode = interactiveMode ?? (apiVersion === 'client.authentication.k8s.io/v1beta1' ? 'IfAvailable' : undefined);
  if (mode === undefined)
    throw fail(`exec.interactiveMode must be given for ${apiVersion}; netplug runs plugins non-interactively: use Never`);
  if (mode === 'Always')
    throw fail('exec.interactiveMode is Always, but netplug runs plugins without a terminal; use Never or IfAvailable');
  if (mode !== 'Never' && mode !== 'IfAvailable')
    throw fail(`exec.interactiveMode ${JSON.stringify(mode).slice(0, 40)} is not one of Never, IfAvailable, Always`);
  return {
    apiVersion: apiVersion as ExecSettings['apiVersion'],
    command,
    args: (args as string[] | undefined | null) ?? [],
    env: pairs,
    ...(typeof installHint === 'string' && installHint.trim() !== '' ? { installHint: installHint.trim() } : {}),
    provideClusterInfo: provideClusterInfo === true,
  };
}
