// netplugctl explain pod NS/NAME [--peer NS/POD|IP] [--port N/PROTO] [--direction ingress|egress]:
// which policies apply to a pod, in the order they are evaluated, and for a peer and port what
// each side decides and which policy and rule decided it (ts/policy/explain.ts, on what
// policy-cluster.ts reads).
import { explain, ExplainError, type DecidedBy, type Decision, type Explanation, type ExplainQuery } from '../policy/explain.ts';
import type { Store } from '../store/store.ts';
import { readSnapshot } from './policy-cluster.ts';
import { refused, UsageError } from './usage.ts';

export interface ExplainFlags {
  peer?: string;
  port?: string;
  direction?: string;
}

const POD = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/;

function query(pod: string, flags: ExplainFlags): ExplainQuery {
  if (!POD.test(pod)) throw new UsageError(`explain pod "${pod}": give the pod as NAMESPACE/NAME`);
  const out: ExplainQuery = { endpoint: pod };
  if (flags.peer !== undefined) out.peer = POD.test(flags.peer) ? { endpoint: flags.peer } : { address: flags.peer };
  if (flags.port !== undefined) {
    const match = /^(\d{1,5})\/(TCP|UDP|SCTP)$/i.exec(flags.port);
    if (!match || Number(match[1]) > 65535)
      throw new UsageError(`--port "${flags.port}" must be PORT/PROTOCOL, such as 80/TCP (TCP, UDP or SCTP)`);
    out.port = { port: Number(match[1]), protocol: (match[2] as string).toUpperCase() };
  }
  if (flags.peer !== undefined && flags.port === undefined)
    throw new UsageError('--peer needs --port (80/TCP): the verdict depends on the port');
  if (flags.port !== undefined && flags.peer === undefined) throw new UsageError('--port needs --peer (NAMESPACE/POD or an address)');
  if (flags.direction !== undefined) {
    if (flags.direction !== 'ingress' && flags.direction !== 'egress')
      throw new UsageError(`--direction "${flags.direction}" must be ingress or egress`);
    out.direction = flags.direction;
  }
  return out;
}

export async function explainPod(store: Store, pod: string, flags: ExplainFlags, json: boolean): Promise<string> {
  const asked = query(pod, flags);
  const issues: string[] = [];
  const snapshot = await readSnapshot(store, issues);
  let explanation: Explanation;
  try {
    explanation = explain(snapshot, asked);
  } catch (err) {
    if (err instanceof ExplainError) throw refused(err.message);
    throw err;
  }
  if (json) return `${JSON.stringify({ ...explanation, unusable: issues }, null, 2)}\n`;
  return text(
    explanation,
    snapshot.endpoints.find((e) => e.key === pod),
    issues,
  );
}

function text(explanation: Explanation, endpoint: { node: string; addresses: readonly string[] } | undefined, issues: string[]): string {
  const addresses = endpoint?.addresses.map((a) => a.replace(/\/(32|128)$/, '')).join(', ');
  const lines = [`pod ${explanation.endpoint}${endpoint ? ` (node ${endpoint.node || 'unknown'}, ${addresses || 'no address'})` : ''}`];
  for (const direction of ['ingress', 'egress'] as const) {
    const list = explanation.policies[direction];
    if (list.length === 0) {
      lines.push(`${direction}: no policy applies (its profiles allow all)`);
      continue;
    }
    lines.push(`${direction} policies, in order:`);
    list.forEach((p, i) => {
      lines.push(`  ${i + 1}. tier ${p.tier}, order ${p.order ?? '-'}: ${p.kind} ${p.display}`);
    });
  }
  for (const flow of explanation.flows) {
    const { from, to, port, protocol } = flow.packet;
    lines.push('', `${from} → ${to} ${port}/${protocol}: ${flow.verdict === 'allow' ? 'allowed' : 'denied'}`);
    for (const decision of flow.decisions) lines.push(`  ${decision.direction} of ${decision.endpoint}: ${describe(decision)}`);
    if (flow.decisions.length === 0) lines.push('  no netplug endpoint at either end');
  }
  for (const issue of explanation.issues) lines.push(`note: ${issue.policy}: field "${issue.field}" ${issue.message}`);
  for (const issue of issues) lines.push(`note: ${issue}`);
  return `${lines.join('\n')}\n`;
}

function describe(decision: Decision): string {
  const verdict = decision.verdict === 'allow' ? 'allowed' : 'denied';
  const by = (d: DecidedBy): string => {
    switch (d.kind) {
      case 'rule':
        return `by ${d.action} rule ${d.rule} of ${d.policy.split('/')[0]} ${d.display} (tier ${d.tier})`;
      case 'end-of-tier':
        return `at the end of tier ${d.tier}: none of its policies for the pod allowed it`;
      case 'profile':
        return `by profile ${d.profile} (no policy decided)`;
      case 'no-profile-allowed':
        return 'no policy or profile allowed it';
    }
  };
  const passed =
    decision.passedBy.length > 0 ? `; passed on by ${decision.passedBy.map((p) => `${p.policy} rule ${p.rule}`).join(', ')}` : '';
  const logged = decision.logged.length > 0 ? `; logged by ${decision.logged.map((p) => `${p.policy} rule ${p.rule}`).join(', ')}` : '';
  return `${verdict} ${by(decision.by)}${passed}${logged}`;
}
