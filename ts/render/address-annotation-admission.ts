// Admission for the two pod annotations that let a pod use addresses it does not own:
// `ipAddrsNoIpam` (an address outside the address manager, so network policy can be bypassed by
// spoofing another pod's) and `floatingIPs` (traffic meant for another address reaches this pod).
// A ValidatingAdmissionPolicy (CEL, evaluated inside kube-apiserver) refuses a pod that sets either
// in a namespace an administrator has not labelled ADDRESS_ANNOTATIONS_LABEL=allowed. Every install
// path ships the same two objects: the manifests, and netplug-operator beside netplug-system.
import { ANNOTATIONS } from '../model/pod-annotations.ts';
import type { KubeObject } from './objects.ts';

/** The namespace label an administrator sets (to ADDRESS_ANNOTATIONS_ALLOWED) to let its pods use the annotations. */
export const ADDRESS_ANNOTATIONS_LABEL = 'projectnet.org/address-annotations';
export const ADDRESS_ANNOTATIONS_ALLOWED = 'allowed';
/** The name of the policy and of its binding. */
export const ADDRESS_ANNOTATIONS_POLICY = 'netplug-address-annotations';

/**
 * Never checked: only administrators create pods there, and netplug's own pods (kube-system for the
 * manifests, netplug-system and netplug-operator for the operator) must start even if the policy
 * were broken, since it fails closed.
 */
export const EXEMPT_NAMESPACES = ['kube-system', 'netplug-system', 'netplug-operator'];

/** What each annotation risks, for the refusal's message. */
const RISKY = [
  { key: ANNOTATIONS.ipAddrsNoIpam, risk: 'addresses outside the address manager can bypass network policy by spoofing' },
  { key: ANNOTATIONS.floatingIPs, risk: 'a floating IP lets the pod receive traffic meant for another' },
];

/**
 * Allowed when the pod does not carry the annotation, or (UPDATE) carries it unchanged: a pod
 * admitted before the policy, or while its namespace was labelled, can still have its labels and
 * finalizers changed; only setting or changing the value is refused.
 */
function validation(key: string, risk: string) {
  const has = (object: string) => `has(${object}.metadata.annotations) && '${key}' in ${object}.metadata.annotations`;
  const label = `${ADDRESS_ANNOTATIONS_LABEL}=${ADDRESS_ANNOTATIONS_ALLOWED}`;
  const advice = `only pods in a namespace labelled ${label} may set it (${risk})`;
  return {
    expression: `!(${has('object')}) || (request.operation == 'UPDATE' && ${has('oldObject')} && oldObject.metadata.annotations['${key}'] == object.metadata.annotations['${key}'])`,
    message: `pod annotation ${key} is not allowed in this namespace: ${advice}`,
    messageExpression: `'pod annotation ${key} is not allowed in namespace ' + request.namespace + ': ${advice}'`,
    reason: 'Forbidden',
  };
}

export function renderAddressAnnotationAdmission(): KubeObject[] {
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: ADDRESS_ANNOTATIONS_POLICY },
      spec: {
        // Fail: a security control that fails open admits the spoofing pod whenever the policy
        // cannot be evaluated. It runs inside kube-apiserver (no webhook that can be down), and the
        // namespaces of the control plane and of netplug are exempt, so failing closed cannot stop them.
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['pods'] }],
          namespaceSelector: {
            matchExpressions: [
              { key: ADDRESS_ANNOTATIONS_LABEL, operator: 'NotIn', values: [ADDRESS_ANNOTATIONS_ALLOWED] },
              { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: EXEMPT_NAMESPACES },
            ],
          },
        },
        validations: RISKY.map(({ key, risk }) => validation(key, risk)),
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: ADDRESS_ANNOTATIONS_POLICY },
      spec: { policyName: ADDRESS_ANNOTATIONS_POLICY, validationActions: ['Deny'] },
    },
  ];
}
