// Network policy seen from outside, on policy-enforcement.test.ts's node and pods (declared there,
// after its other tests: a → b is denied by deny-b alone by then): the packets a Log rule matches
// in the agent's log, naming the policy; what the Deny rules of a policy, and what no rule,
// denied, on /metrics.
import type { TestFn } from 'ava';

import { POLICY_GROUP } from '../../ts/store/kubernetes/resources.ts';
import type { Netns } from '../helpers/nodes.ts';
import type { Teardowns } from '../helpers/shared.ts';
import { connects, ECHO_PORT, metricValue, type PolicyNode } from './policy-node.ts';

interface Pod {
  name: string;
  netns: Netns;
  address: string;
  hostInterface: string;
}

export interface ObservedWorld {
  policyNode: PolicyNode;
  /** The namespace of the pods. */
  namespace: string;
  shared: Teardowns;
  /** Two pods of the node, a → b denied by a default-deny policy on b. */
  a: Pod;
  b: Pod;
  until(what: string, check: () => boolean | Promise<boolean>): Promise<unknown>;
}

const escaped = (text: string) => text.replaceAll('.', '\\.');

export function observedPolicy(test: TestFn, world: () => ObservedWorld): void {
  test.serial(
    'a Log rule writes the packets it matches to the agent log, naming the policy; /metrics counts what was denied',
    async (t) => {
      const { policyNode, namespace, shared, a, b, until } = world();
      const metric = (series: string) => metricValue(policyNode.agentGet('/metrics').text, series);
      t.false(connects(a, b));
      await until('a → b counted as denied by no policy rule', () => {
        connects(a, b);
        return metric('netplug_policy_default_denied_packets_total{reason="no-policy-allowed"}') > 0;
      });

      const custom = policyNode.kube.custom;
      const policy = { group: POLICY_GROUP, version: 'v3', namespace, plural: 'networkpolicies' };
      const fromA = { protocol: 'TCP', source: { selector: "app == 'a'" }, destination: { ports: [ECHO_PORT] } };
      await custom.createNamespacedCustomObject({
        ...policy,
        body: {
          apiVersion: 'projectnet.org/v3',
          kind: 'NetworkPolicy',
          metadata: { name: 'log-then-deny', namespace },
          spec: {
            order: 10,
            selector: "app == 'b'",
            types: ['Ingress'],
            ingress: [
              { action: 'Log', ...fromA },
              { action: 'Deny', ...fromA },
            ],
          },
        },
      });
      shared.teardown(() => custom.deleteNamespacedCustomObject({ ...policy, name: 'log-then-deny' }).catch(() => undefined));
      const denied = `{policy="${namespace}/log-then-deny",kind="NetworkPolicy"}`;
      const logged = new RegExp(
        ` INFO policy: Log rule ${namespace}/log-then-deny ingress rule 0: tcp ${escaped(a.address)}:\\d+ -> ${escaped(b.address)}:${ECHO_PORT} in=${a.hostInterface} out=${b.hostInterface}$`,
        'm',
      );
      await until('a → b logged by the Log rule and counted by the Deny rule', () => {
        t.false(connects(a, b));
        return logged.test(policyNode.log()) && metric(`netplug_policy_denied_packets_total${denied}`) > 0;
      });
      t.true(metric(`netplug_policy_denied_bytes_total${denied}`) > 0);
      t.regex(policyNode.log(), / INFO policy: writing the packets of Log rules to this log \(NFLOG group 20\)$/m);
    },
  );
}
