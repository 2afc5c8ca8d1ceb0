// IP pools: the ranges workload addresses come from, in blocks of `blockSize`, for the nodes their
// selector matches. Checked as read back in checked-documents.ts, built from a person's options in
// pool-resource.ts.

export const ENCAPSULATION_MODES = ['Never', 'Always', 'CrossSubnet'] as const;
export type EncapsulationMode = (typeof ENCAPSULATION_MODES)[number];

export interface PoolSpec {
  cidr: string;
  blockSize: number;
  nodeSelector: string;
  ipipMode: EncapsulationMode;
  vxlanMode: EncapsulationMode;
  natOutgoing: boolean;
  disabled: boolean;
}

export interface PoolResource {
  kind: 'IPPool';
  apiVersion: string;
  metadata: { name: string; creationTimestamp: string };
  spec: PoolSpec;
}
