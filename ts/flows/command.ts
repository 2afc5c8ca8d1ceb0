// netplugctl flows: the flow records netplug-flows holds, filtered (filter.ts), as a table or JSON,
// or followed as they arrive (--follow, until interrupted). netplug-flows' read port is reached
// through the API server's port-forward (port-forward.ts), or at --server URL (a port-forward of
// one's own). Exit 0 done (or interrupted while following), 1 netplug-flows cannot be reached or
// refuses, 2 a usage mistake.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import * as k8s from '@kubernetes/client-node';

import type { ClusterCommand, ClusterCommandIo } from '../ctl/cluster-command.ts';
import { table } from '../ctl/table.ts';
import { shorten } from '../log/echo.ts';
import type { FlowRecord } from '../model/flow.ts';
import { describeError } from '../runtime/errors.ts';
import { checkedFilter, checkedLimit, DEFAULT_LIMIT, FilterError } from './filter.ts';
import { FLOWS_LABEL, type Forward, forwardToFlows } from './port-forward.ts';
import { FLOW_HEADER, flowRow, followLine } from './table.ts';

const COMMAND = 'netplugctl flows';

const USAGE = `usage: ${COMMAND} [--namespace NS] [--pod [NS/]NAME] [--policy NAME] [--action Allow|Deny]
                       [--node NODE] [--since DURATION] [--limit N] [--follow] [-o table|json]
                       [--server URL | --kubeconfig FILE --flows-namespace NS]

The flow records netplug-flows holds: what each node's network policy decided of the flows it saw,
per interval, newest last. Every filter given must hold.

  -n, --namespace NS     either end in namespace NS
  --pod [NS/]NAME        either end this pod (NAME alone: in --namespace, else in any namespace)
  --policy NAME          decided by this policy: NS/NAME (a NetworkPolicy), NAME (a global
                         policy or a profile), as the POLICY column shows it, or its key
  --action Allow|Deny    the verdict
  --node NODE            recorded by this node
  --since DURATION       ended within DURATION (15m, 1h30m), or after a time (2026-11-28T19:00:00Z)
  --limit N              the newest N records (default ${DEFAULT_LIMIT}); with --follow, first
                         these of the records held, then the new ones
  -f, --follow           print records as they arrive, until interrupted (with --since or
                         --limit, first the matching records held)
  -o, --output FORMAT    table (default) or json ({"records": [...]}; with --follow one record
                         a line)
  --server URL           netplug-flows' read port at URL (http://127.0.0.1:9446 after
                         kubectl -n kube-system port-forward deployment/netplug-flows 9446)
  --kubeconfig FILE      else KUBECONFIG, else ~/.kube/config: without --server, the read port is
                         reached through the API server's port-forward (pods/portforward)
  --flows-namespace NS   where netplug-flows runs (default kube-system; pods labelled
                         ${FLOWS_LABEL})
`;

const OPTIONS = {
  namespace: { type: 'string', short: 'n' },
  pod: { type: 'string' },
  policy: { type: 'string' },
  action: { type: 'string' },
  node: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
  follow: { type: 'boolean', short: 'f' },
  output: { type: 'string', short: 'o' },
  server: { type: 'string' },
  kubeconfig: { type: 'string' },
  'flows-namespace': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

class Usage extends Error {}

interface Request {
  /** The query string of GET /v1/flows. */
  query: string;
  json: boolean;
  follow: boolean;
  limit: number;
  server: string | undefined;
  kubeconfig: string | undefined;
  namespace: string;
}

function request(args: readonly string[], env: NodeJS.ProcessEnv): Request | 'help' {
  let values: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; strict: true; allowPositionals: true }>>['values'];
  try {
    const parsed = parseArgs({ args: [...args], options: OPTIONS, strict: true, allowPositionals: true });
    if (parsed.positionals.length > 0) throw new Usage(`unexpected argument "${shorten(parsed.positionals[0] ?? '', 100)}"`);
    values = parsed.values;
  } catch (err) {
    if (err instanceof Usage) throw err;
    throw new Usage(((err as Error).message.split('. To specify')[0] ?? 'bad arguments').replace(/^Unknown option/, 'unknown flag'));
  }
  if (values.help) return 'help';
  const texts = {
    namespace: values.namespace,
    pod: values.pod,
    policy: values.policy,
    action: values.action,
    node: values.node,
    since: values.since,
  };
  const given = Object.fromEntries(Object.entries(texts).filter((entry): entry is [string, string] => entry[1] !== undefined));
  let filter: ReturnType<typeof checkedFilter>;
  let limit: number | undefined;
  try {
    filter = checkedFilter(given, Date.now(), (name) => `--${name}`);
    if (values.limit !== undefined) limit = checkedLimit(values.limit, '--limit');
  } catch (err) {
    if (err instanceof FilterError) throw new Usage(err.message);
    throw err;
  }
  const output = values.output ?? 'table';
  if (output !== 'table' && output !== 'json') throw new Usage(`-o "${shorten(output, 100)}" must be table or json`);
  let server: string | undefined;
  if (values.server !== undefined) {
    const url = URL.canParse(values.server) ? new URL(values.server) : undefined;
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash)
      throw new Usage(`--server "${shorten(values.server, 100)}" must be a URL such as http://127.0.0.1:9446`);
    server = url.href.replace(/\/+$/, '');
  }
  const namespace = values['flows-namespace'] ?? 'kube-system';
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace))
    throw new Usage(`--flows-namespace "${shorten(namespace, 100)}" is not a namespace name`);
  // The server reads `since` on its own clock, which is the nodes' rather than this machine's.
  const params = new URLSearchParams();
  for (const name of ['namespace', 'pod', 'policy', 'node'] as const) {
    const value = filter[name];
    if (value !== undefined) params.set(name, value);
  }
  if (filter.action !== undefined) params.set('action', filter.action);
  if (values.since !== undefined) params.set('since', values.since);
  if (limit !== undefined) params.set('limit', String(limit));
  if (values.follow) params.set('follow', '1');
  return {
    query: params.toString(),
    json: output === 'json',
    follow: values.follow === true,
    limit: limit ?? DEFAULT_LIMIT,
    server,
    kubeconfig: values.kubeconfig ?? env['KUBECONFIG'] ?? (env['HOME'] ? join(env['HOME'], '.kube/config') : undefined),
    namespace,
  };
}

export const runFlowsCommand: ClusterCommand = async (args, env, io) => {
  let asked: Request | 'help';
  try {
    asked = request(args, env);
  } catch (err) {
    if (!(err instanceof Usage)) throw err;
    io.err(`${COMMAND}: ${err.message} (${COMMAND} --help)\n`);
    return 2;
  }
  if (asked === 'help') {
    io.out(USAGE);
    return 0;
  }
  let forward: Forward | undefined;
  let base = asked.server;
  if (base === undefined) {
    const { kubeconfig } = asked;
    if (!kubeconfig || !existsSync(kubeconfig)) {
      io.err(
        `${COMMAND}: kubeconfig ${kubeconfig ? `"${kubeconfig}" does not exist` : 'not given'} (--kubeconfig FILE or KUBECONFIG; or --server URL)\n`,
      );
      return 1;
    }
    const config = new k8s.KubeConfig();
    try {
      config.loadFromFile(kubeconfig);
      forward = await forwardToFlows(config, asked.namespace);
    } catch (err) {
      io.err(`${COMMAND}: ${describeError(err)}\n`);
      return 1;
    }
    base = forward.url;
  }
  const where = forward ? `pod ${forward.pod} (through the API server's port-forward)` : base;
  try {
    return await show(`${base}/v1/flows?${asked.query}`, asked, io, where, forward);
  } finally {
    await forward?.close();
  }
};

async function show(url: string, asked: Request, io: ClusterCommandIo, where: string, forward: Forward | undefined): Promise<number> {
  const unreachable = (err: unknown) => {
    const why = forward?.problem() ?? describeError(err);
    io.err(`${COMMAND}: cannot read netplug-flows at ${where}: ${why}\n`);
    return 1;
  };
  let response: Response;
  try {
    response = await fetch(url, { signal: io.signal });
  } catch (err) {
    if (io.signal.aborted) return 0;
    return unreachable(err);
  }
  if (response.status !== 200) {
    const text = await response.text().catch(() => '');
    let message = shorten(text.trim(), 300);
    try {
      message = String((JSON.parse(text) as { error?: unknown }).error ?? message);
    } catch {
      // Not netplug-flows' JSON: its text as it is.
    }
    io.err(`${COMMAND}: netplug-flows at ${where} answered ${response.status}: ${message}\n`);
    return 1;
  }
  if (!asked.follow) {
    let records: FlowRecord[];
    try {
      records = ((await response.json()) as { records: FlowRecord[] }).records;
    } catch (err) {
      if (io.signal.aborted) return 0;
      return unreachable(err);
    }
    if (asked.json) io.out(`${JSON.stringify({ records }, null, 2)}\n`);
    else if (records.length === 0) io.err('no flow record matches\n');
    else io.out(table(FLOW_HEADER, records.map(flowRow)));
    if (records.length >= asked.limit)
      io.err(`the newest ${records.length} records are shown: --limit N or --since DURATION shows others\n`);
    return 0;
  }
  if (!asked.json) io.out(followLine(FLOW_HEADER));
  const decoder = new TextDecoder();
  let pending = '';
  try {
    for await (const chunk of response.body ?? []) {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim() === '') continue;
        io.out(asked.json ? `${line}\n` : followLine(flowRow(JSON.parse(line) as FlowRecord)));
      }
    }
  } catch (err) {
    if (io.signal.aborted) return 0;
    return unreachable(err);
  }
  if (io.signal.aborted) return 0;
  io.err(`${COMMAND}: netplug-flows at ${where} ended the stream\n`);
  return 1;
}
