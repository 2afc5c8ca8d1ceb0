// The policy compiler's host endpoints, without a kernel: which chains a node's host endpoints
// get, which policies go where (normal, applyOnForward, preDNAT, doNotTrack), precedence of a
// named interface over all interfaces, and other nodes' host endpoints as peers only.
// test/node/host-endpoints.test.ts proves the same with real packets.
import test from 'ava';

import type { Chain, TablePart } from '../../ts/nft/model.ts';
import type { NetworkPolicyResource } from '../../ts/model/policy.ts';
import { PolicyEngine } from '../../ts/policy/engine.ts';
import { parseFailsafePorts } from '../../ts/policy/host-chains.ts';
import { MARK, policyChainName } from '../../ts/policy/names.ts';

const gnp = (name: string, spec: NetworkPolicyResource['spec']): NetworkPolicyResource => ({
  kind: 'GlobalNetworkPolicy',
  apiVersion: 'projectnet.org/v3',
  metadata: { name },
  spec,
});

function engineWith(...endpoints: { name: string; node?: string; interfaceName?: string; expectedIPs?: string[] }[]) {
  const engine = new PolicyEngine({ nodeName: 'n1', families: [4] });
  for (const e of endpoints)
    engine.upsertHostEndpoint({ node: 'n1', expectedIPs: [], labels: { role: 'edge' }, profiles: [], ...e, name: e.name });
  return engine;
}

const chain = (part: TablePart, name: string): Chain | undefined => part.chains?.find((c) => c.name === name);
const text = (c: Chain | undefined) => JSON.stringify(c?.rules ?? null);
/** The policy chains an endpoint chain's list (the goto it ends with) jumps to. */
function policiesOf(part: TablePart, endpointChain: string): string[] {
  const list = chain(part, endpointChain)?.rules?.at(-1)?.verdict as { goto?: string } | undefined;
  return (chain(part, list?.goto ?? '')?.rules ?? []).flatMap((r) =>
    typeof r.verdict === 'object' && 'jump' in r.verdict ? [r.verdict.jump] : [],
  );
}

test('no host endpoint on this node: no host chain; one elsewhere is a peer of selectors only', (t) => {
  const engine = engineWith({ name: 'n2-eth0', node: 'n2', interfaceName: 'eth0', expectedIPs: ['192.0.2.2'] });
  engine.upsertPolicy(gnp('nodes', { selector: "role == 'edge'", ingress: [{ action: 'Allow' }] }));
  engine.flush();
  const part = engine.part();
  t.is(chain(part, 'host-input'), undefined);
  t.is(chain(part, 'failsafe-in'), undefined);
  t.false(
    (part.chains ?? []).some((c) => c.name.startsWith('pi-')),
    'a policy selecting no local endpoint is not programmed',
  );
});

test('a named interface comes before all interfaces; workloads and loopback are never a host endpoint’s', (t) => {
  const engine = engineWith({ name: 'a-all', interfaceName: '*' }, { name: 'b-eth0', interfaceName: 'eth0' });
  engine.flush();
  const input = text(chain(engine.part(), 'host-input'));
  const order = ['"lo"', '"cali*"', '"eth0"', '{"goto":"fh-'].map((needle) => input.indexOf(needle));
  t.true(
    order.every((at, i) => at >= 0 && (i === 0 || at > (order[i - 1] as number))),
    input,
  );
  // Without policies or profiles, the host's own traffic is dropped but for the failsafe ports.
  t.regex(text(chain(engine.part(), 'fh-eth0')), /failsafe-in/);
  t.deepEqual(policiesOf(engine.part(), 'fh-eth0'), []);
  t.regex(text(chain(engine.part(), 'failsafe-in')), /\[22,179,2379,2380,5473,6443,6666,6667,10250\]/);
});

test('each policy is evaluated where its flags say; workloads never get preDNAT or doNotTrack policies', (t) => {
  const engine = engineWith({ name: 'n1-eth0', interfaceName: 'eth0' });
  engine.upsertEndpoint({
    key: 'shop/web',
    namespace: 'shop',
    name: 'web',
    labels: { role: 'edge' },
    addresses: ['10.0.0.5'],
    node: 'n1',
    interfaceName: 'calia',
  });
  const selector = "role == 'edge'";
  engine.upsertPolicy(gnp('normal', { selector, ingress: [{ action: 'Allow' }] }));
  engine.upsertPolicy(gnp('forward', { selector, applyOnForward: true, ingress: [{ action: 'Allow' }] }));
  engine.upsertPolicy(gnp('pre-dnat', { selector, applyOnForward: true, preDNAT: true, ingress: [{ action: 'Deny' }] }));
  engine.upsertPolicy(gnp('untracked', { selector, applyOnForward: true, doNotTrack: true, ingress: [{ action: 'Allow' }] }));
  engine.flush();
  const part = engine.part();
  const jumpsOf = (endpointChain: string) =>
    policiesOf(part, endpointChain)
      .map((name) => (chain(part, name)?.rules?.[0]?.comment ?? '').replace(/ ingress rule \d+$/, ''))
      .sort();
  t.deepEqual(jumpsOf('fh-eth0'), ['forward', 'normal']);
  t.deepEqual(jumpsOf('fhfw-eth0'), ['forward']);
  t.deepEqual(jumpsOf('fhpd-eth0'), ['pre-dnat']);
  t.deepEqual(jumpsOf('fhnt-eth0'), ['untracked']);
  t.is(chain(part, 'thfw-eth0'), undefined, 'no applyOnForward egress policy: forwarded traffic out is not policed');
  t.deepEqual(jumpsOf('tw-calia'), ['forward', 'normal']);
  // preDNAT and doNotTrack lists neither drop at the end of a tier nor at their end.
  const preDnatList = (chain(part, 'fhpd-eth0')?.rules?.at(-1)?.verdict as { goto?: string } | undefined)?.goto ?? '';
  t.notRegex(text(chain(part, preDnatList)), /"drop"/);
  t.deepEqual(
    chain(part, policyChainName('GlobalNetworkPolicy/untracked', 'ingress'))?.rules?.[0]?.statements,
    [{ mark: { or: MARK.untracked } }, { notrack: {} }],
    'a doNotTrack Allow exempts the packet from tracking and marks it for the filter hooks',
  );
});

test('failsafe ports: `none`, and an entry that is not <tcp|udp>:<port> is named', (t) => {
  t.deepEqual(parseFailsafePorts('none'), []);
  t.deepEqual(parseFailsafePorts(' TCP:22 , udp:68'), [
    { protocol: 'tcp', port: 22 },
    { protocol: 'udp', port: 68 },
  ]);
  t.throws(() => parseFailsafePorts('tcp:70000'), { message: /"tcp:70000"/ });
});
