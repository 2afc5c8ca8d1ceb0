// Flow records for the flows tests: a pod-to-pod TCP flow allowed by a NetworkPolicy, changed as
// each test needs.
import type { FlowEnd, FlowRecord } from '../../ts/model/flow.ts';

export const pod = (namespace: string, name: string, address: string, port?: number): FlowEnd => ({
  address,
  ...(port === undefined ? {} : { port }),
  kind: 'pod',
  namespace,
  name,
  labels: { app: name },
});

export function flowRecord(changes: Partial<FlowRecord> = {}): FlowRecord {
  const end = changes.end ?? Date.now();
  return {
    node: 'node-a',
    start: end - 10_000,
    end,
    source: pod('shop', 'client', '10.244.1.5'),
    destination: pod('shop', 'web', '10.244.2.7', 8080),
    protocol: 6,
    reporter: 'dst',
    action: 'Allow',
    policy: { policy: 'NetworkPolicy/shop/allow-web', tier: 'default', rule: 0, action: 'Allow' },
    flows: 3,
    packets: 40,
    bytes: 5200,
    ...changes,
  };
}
